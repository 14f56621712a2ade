#include "tools/char_lm.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "kiln/keras/io/file_util.h"
#include "kiln/kiln.h"

namespace kiln::tools {

bool is_char_lm(const std::string& kind) {
  return kind == "lstm" || kind == "gru" || kind == "transformer";
}

Model build_char_lm(const CharLmConfig& c) {
  const int64_t vocab = c.vocabulary.size();
  if (c.model == "lstm" || c.model == "gru") {
    RecurrentOptions rnn{.return_sequences = true};
    Layer recurrent = c.model == "lstm" ? Layer(LSTM(c.units, rnn)) : Layer(GRU(c.units, rnn));
    Tensor ids = Input(Shape{kUnknownDim}, DType::i32, "characters");
    Tensor logits = Dense(vocab)(recurrent(Embedding(vocab, c.embedding_dim)(ids)));
    return Model(ids, logits, c.model + "_char_lm");
  }
  if (c.model == "transformer") {
    if (c.embedding_dim % c.heads != 0)
      throw Error(
          fmt::format("transformer: --embedding-dim {} (d_model) must be a multiple of --heads {}",
                      c.embedding_dim, c.heads));
    const int64_t d = c.embedding_dim;
    Tensor ids = Input(Shape{kUnknownDim}, DType::i32, "characters");
    Tensor x = Embedding(vocab, d)(ids);
    x = Add()({x, PositionEmbedding(c.seq_len)(x)});
    Tensor a = MultiHeadAttention(c.heads, d / c.heads,
                                  {.use_causal_mask = true})(LayerNormalization()(x));
    x = Add()({x, a});
    Tensor f = Dense(d)(Dense(c.units, {.activation = "gelu"})(LayerNormalization()(x)));
    x = Add()({x, f});
    Tensor logits = Dense(vocab)(LayerNormalization()(x));
    return Model(ids, logits, "transformer_char_lm");
  }
  throw Error(
      fmt::format("unknown character model \"{}\": expected lstm, gru or transformer", c.model));
}

std::string char_lm_config_path(const std::string& weights_path) { return weights_path + ".json"; }

void save_char_lm_config(const std::string& weights_path, const CharLmConfig& c) {
  Json j;
  j["model"] = c.model;
  j["seq_len"] = c.seq_len;
  j["embedding_dim"] = c.embedding_dim;
  j["units"] = c.units;
  j["heads"] = c.heads;
  Json chars = Json::array();
  for (char32_t ch : c.vocabulary.chars()) chars.push_back(uint32_t(ch));
  j["vocabulary"] = chars;
  io::write_file_atomically(char_lm_config_path(weights_path), j.dump(1) + "\n");
}

CharLmConfig load_char_lm_config(const std::string& weights_path) {
  const std::string path = char_lm_config_path(weights_path);
  std::string text = io::read_file(path);
  try {
    Json j = Json::parse(text);
    CharLmConfig c;
    c.model = j.at("model").get<std::string>();
    c.seq_len = j.at("seq_len").get<int64_t>();
    c.embedding_dim = j.at("embedding_dim").get<int64_t>();
    c.units = j.at("units").get<int64_t>();
    c.heads = j.at("heads").get<int64_t>();
    std::u32string chars;
    for (const Json& v : j.at("vocabulary")) {
      auto cp = v.get<uint32_t>();
      if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        throw Error(fmt::format("vocabulary entry {} is not a Unicode scalar value", cp));
      chars.push_back(char32_t(cp));
    }
    if (!is_char_lm(c.model) || c.seq_len <= 0 || c.embedding_dim <= 0 || c.units <= 0 ||
        c.heads <= 0 || chars.empty())
      throw Error(
          "a field is out of range (model lstm/gru/transformer, positive sizes, a "
          "non-empty vocabulary)");
    c.vocabulary = data::CharVocabulary(std::move(chars));
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw Error(
        fmt::format("{} is not the model description kiln train writes: {}", path, e.what()));
  } catch (const Error& e) {
    throw Error(fmt::format("{} is not a valid model description: {}", path, e.what()));
  }
}

std::string generate_text(const Model& model, const CharLmConfig& c, const std::string& prompt,
                          int64_t length, double temperature, uint64_t seed) {
  if (prompt.empty())
    throw Error("kiln generate: the prompt is empty; give at least one character to start from");
  if (!(temperature >= 0) || !std::isfinite(temperature))
    throw Error(fmt::format("kiln generate: temperature must be >= 0, got {}", temperature));
  std::vector<int32_t> ids = c.vocabulary.encode(prompt);
  const size_t start = ids.size();
  uint64_t state = seed;
  auto uniform = [&state] {  // splitmix64 -> [0, 1), the same on every machine
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return double((z ^ (z >> 31)) >> 11) * 0x1p-53;
  };
  for (int64_t n = 0; n < length; ++n) {
    const size_t from = ids.size() > size_t(c.seq_len) ? ids.size() - size_t(c.seq_len) : 0;
    std::vector<int32_t> context(ids.begin() + std::ptrdiff_t(from), ids.end());
    const int64_t len = int64_t(context.size());
    Tensor logits = model(tensor(context, {1, len}));  // [1, len, V]
    std::vector<double> last =
        cast(gather(logits, scalar(double(len - 1), DType::i64), 1), DType::f64)
            .to_vector<double>();
    size_t pick = 0;
    if (temperature == 0) {
      for (size_t v = 1; v < last.size(); ++v)
        if (last[v] > last[pick]) pick = v;
    } else {
      double top = last[0];
      for (double v : last) top = std::max(top, v);
      std::vector<double> p(last.size());
      double total = 0;
      for (size_t v = 0; v < last.size(); ++v)
        total += p[v] = std::exp((last[v] - top) / temperature);
      double u = uniform() * total, acc = 0;
      pick = last.size() - 1;
      for (size_t v = 0; v < p.size(); ++v)
        if ((acc += p[v]) > u) {
          pick = v;
          break;
        }
    }
    ids.push_back(int32_t(pick));
  }
  return c.vocabulary.decode(std::vector<int32_t>(ids.begin() + std::ptrdiff_t(start), ids.end()));
}

}  // namespace kiln::tools
