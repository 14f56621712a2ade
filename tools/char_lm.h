// The character language models of `kiln train --model lstm|gru|transformer --dataset
// text:FILE` and `kiln generate`: the models, the file that describes a trained one (beside
// its weights), and sampling.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/keras/data/text.h"
#include "kiln/keras/models/model.h"
#include "tools/train_options.h"

namespace kiln::tools {

// What a trained character model needs besides its weights; written as JSON to
// `<weights>.json` by `kiln train` and read by `kiln generate`.
struct CharLmConfig {
  std::string model = "lstm";  // lstm, gru or transformer
  int64_t seq_len = 64;        // training window (the transformer's longest context)
  int64_t embedding_dim = 64;  // lstm/gru: the character embedding; transformer: d_model
  int64_t units = 256;         // lstm/gru: recurrent units; transformer: feed-forward width
  int64_t heads = 4;           // transformer
  data::CharVocabulary vocabulary;
};

bool is_char_lm(const std::string& model_kind);

// `kiln train` for a character model: `train` as given on the command line (its dataset is
// ignored: text_path is the text), `config` the model's sizes.
struct CharLmTrainArgs {
  TrainOptions train;
  CharLmConfig config;
  std::string text_path = "/usr/share/common-licenses/GPL-3";
};
// Trains on windows of the text (the last 10% held out), prints loss and perplexity per epoch,
// then test_loss, test_perplexity and the unigram baseline (also written to train.json when
// set); --mode both adds the eager-vs-compiled table and fails when the two runs disagree.
void run_char_lm_training(const CharLmTrainArgs& args);

// Logits [batch, timesteps, vocabulary] for int32 character ids [batch, timesteps]:
//   lstm / gru:   Embedding -> LSTM/GRU(units, return_sequences) -> Dense(vocabulary)
//   transformer:  Embedding + PositionEmbedding -> one pre-norm causal block (LayerNorm,
//                 MultiHeadAttention(heads, causal), residual; LayerNorm, Dense(units, gelu),
//                 Dense, residual) -> LayerNorm -> Dense(vocabulary)
Model build_char_lm(const CharLmConfig& config);

// `<weights>.json`; written atomically. Reading: kiln::Error naming the file when it is
// missing or malformed.
std::string char_lm_config_path(const std::string& weights_path);
// The language model's description inside a saved model directory (`kiln train --save-model`):
// the "weights path" whose char_lm_config_path is DIR/char_lm.json.
inline std::string char_lm_model_description(const std::string& model_dir) {
  return model_dir + "/char_lm";
}
void save_char_lm_config(const std::string& weights_path, const CharLmConfig& config);
CharLmConfig load_char_lm_config(const std::string& weights_path);

// `length` characters sampled after `prompt` (which must be non-empty and use only the
// vocabulary's characters): each from softmax(logits / temperature) of the last position given
// the last seq_len characters; temperature 0 picks the most likely character. Seeded.
std::string generate_text(const Model& model, const CharLmConfig& config, const std::string& prompt,
                          int64_t length, double temperature, uint64_t seed);

}  // namespace kiln::tools
