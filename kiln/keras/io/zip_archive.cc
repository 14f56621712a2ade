#include "kiln/keras/io/zip_archive.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <zip.h>

#include <algorithm>
#include <memory>
#include <set>

#include "kiln/ir/error.h"

namespace kiln::io {
namespace {

std::string error_text(zip_error_t* error) {
  std::string s = zip_error_strerror(error);
  return s;
}

std::string code_text(int code) {
  zip_error_t e;
  zip_error_init_with_code(&e, code);
  std::string s = zip_error_strerror(&e);
  zip_error_fini(&e);
  return s;
}

zip_t* as_zip(void* p) { return static_cast<zip_t*>(p); }

// Deflate expands at most ~1032:1; stored entries not at all.
constexpr uint64_t kMaxExpansion = 1100;

}  // namespace

ZipReader::ZipReader(std::string bytes, std::string what)
    : bytes_(std::move(bytes)), what_(std::move(what)) {
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* src = zip_source_buffer_create(bytes_.data(), bytes_.size(), 0, &error);
  if (!src) {
    std::string msg = error_text(&error);
    zip_error_fini(&error);
    throw Error(fmt::format("\"{}\": cannot read the zip archive: {}", what_, msg));
  }
  zip_t* za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &error);
  if (!za) {
    std::string msg = error_text(&error);
    zip_source_free(src);
    zip_error_fini(&error);
    throw Error(fmt::format(
        "\"{}\" is not a valid zip archive ({}); a .keras file is the zip archive Keras' "
        "model.save writes: is the file complete?",
        what_, msg));
  }
  zip_error_fini(&error);
  archive_ = za;
  const zip_int64_t n = zip_get_num_entries(za, 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    const char* name = zip_get_name(za, zip_uint64_t(i), ZIP_FL_ENC_GUESS);
    if (!name) {
      throw Error(fmt::format("\"{}\": zip entry {} has no readable name ({})", what_, i,
                              zip_strerror(za)));
    }
    names_.emplace_back(name);
  }
}

ZipReader::~ZipReader() {
  if (archive_) zip_discard(as_zip(archive_));
}

bool ZipReader::contains(const std::string& name) const {
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

std::string ZipReader::read(const std::string& name) const {
  zip_t* za = as_zip(archive_);
  const zip_int64_t index = zip_name_locate(za, name.c_str(), 0);
  if (index < 0)
    throw Error(fmt::format("\"{}\" has no entry \"{}\" (it holds: {})", what_, name,
                            fmt::format("{}", fmt::join(names_, ", "))));
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(za, zip_uint64_t(index), 0, &st) != 0)
    throw Error(fmt::format("\"{}\": cannot read entry \"{}\": {}", what_, name, zip_strerror(za)));
  if (!(st.valid & ZIP_STAT_SIZE) || !(st.valid & ZIP_STAT_COMP_SIZE))
    throw Error(fmt::format("\"{}\": entry \"{}\" has no size", what_, name));
  if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE)
    throw Error(fmt::format("\"{}\": entry \"{}\" is encrypted; kiln reads unencrypted archives",
                            what_, name));
  if ((st.valid & ZIP_STAT_COMP_METHOD) && st.comp_method != ZIP_CM_STORE &&
      st.comp_method != ZIP_CM_DEFLATE)
    throw Error(fmt::format(
        "\"{}\": entry \"{}\" uses zip compression method {}; kiln reads stored and deflated "
        "entries",
        what_, name, st.comp_method));
  const uint64_t limit =
      std::min<uint64_t>(kMaxZipEntryBytes, std::max<uint64_t>(st.comp_size, 1) * kMaxExpansion);
  if (st.size > limit || st.comp_size > bytes_.size())
    throw Error(fmt::format(
        "\"{}\": entry \"{}\" claims {} bytes ({} compressed, archive {} bytes), more than it "
        "can hold (at most {}); the archive is damaged",
        what_, name, st.size, st.comp_size, bytes_.size(), limit));
  std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> f(zip_fopen_index(za, zip_uint64_t(index), 0),
                                                      zip_fclose);
  if (!f)
    throw Error(fmt::format("\"{}\": cannot open entry \"{}\": {}", what_, name, zip_strerror(za)));
  std::string out(st.size, '\0');
  uint64_t got = 0;
  while (got < st.size) {
    zip_int64_t r = zip_fread(f.get(), out.data() + got, st.size - got);
    if (r < 0)
      throw Error(fmt::format("\"{}\": entry \"{}\" is damaged: {}", what_, name,
                              zip_file_strerror(f.get())));
    if (r == 0) break;
    got += uint64_t(r);
  }
  // Reading once more at the end makes libzip check the CRC.
  char extra;
  if (got != st.size || zip_fread(f.get(), &extra, 1) != 0)
    throw Error(fmt::format("\"{}\": entry \"{}\" is damaged: {} of {} bytes readable ({})", what_,
                            name, got, st.size, zip_file_strerror(f.get())));
  int rc = zip_fclose(f.release());
  if (rc != 0)
    throw Error(fmt::format("\"{}\": entry \"{}\" is damaged: {}", what_, name, code_text(rc)));
  return out;
}

std::string zip_bytes(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::set<std::string> seen;
  for (const auto& [name, bytes] : entries)
    if (name.empty() || !seen.insert(name).second)
      throw Error(fmt::format("zip_bytes: entry name \"{}\" is {}", name,
                              name.empty() ? "empty" : "used twice"));
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* out = zip_source_buffer_create(nullptr, 0, 0, &error);
  if (!out) throw Error(fmt::format("zip_bytes: {}", error_text(&error)));
  zip_t* za = zip_open_from_source(out, ZIP_TRUNCATE, &error);
  if (!za) {
    std::string msg = error_text(&error);
    zip_source_free(out);
    zip_error_fini(&error);
    throw Error(fmt::format("zip_bytes: {}", msg));
  }
  zip_error_fini(&error);
  zip_source_keep(out);  // outlives zip_close, which writes the archive into it
  auto fail = [&](const std::string& what) {
    std::string msg = fmt::format("zip_bytes: {}: {}", what, zip_strerror(za));
    zip_discard(za);
    zip_source_free(out);
    throw Error(msg);
  };
  for (const auto& [name, bytes] : entries) {
    zip_source_t* s = zip_source_buffer(za, bytes.data(), bytes.size(), 0);
    if (!s) fail(name);
    zip_int64_t i = zip_file_add(za, name.c_str(), s, ZIP_FL_ENC_UTF_8);
    if (i < 0) {
      zip_source_free(s);
      fail(name);
    }
    if (zip_set_file_compression(za, zip_uint64_t(i), ZIP_CM_DEFLATE, 0) != 0) fail(name);
  }
  if (zip_close(za) != 0) fail("writing the archive");
  std::string result;
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_source_stat(out, &st) != 0 || zip_source_open(out) != 0) {
    zip_source_free(out);
    throw Error("zip_bytes: cannot read the archive back from memory");
  }
  result.resize(st.size);
  zip_int64_t r = zip_source_read(out, result.data(), st.size);
  zip_source_close(out);
  zip_source_free(out);
  if (r < 0 || uint64_t(r) != st.size) throw Error("zip_bytes: short read of the archive");
  return result;
}

}  // namespace kiln::io
