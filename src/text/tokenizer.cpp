// Tokenizer loading, encoding and decoding (see tokenizer.h). The pipeline stages live in
// tokenizer_steps.cpp and the BPE model in bpe.cpp; this file wires them together with the
// added-token vocabulary and tokenizer_config.json.
#include "text/tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "text/bpe.h"
#include "text/tokenizer_steps.h"
#include "text/utf8.h"

namespace ninfer {

using json = nlohmann::json;

namespace {

struct AddedToken {
  int32_t id;
  std::string content;
  bool special = false, lstrip = false, rstrip = false, single_word = false;
};

json read_json(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("{}: cannot open", path.string());
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::exception& e) {
    fail("{}: invalid JSON: {}", path.string(), e.what());
  }
}

// A token field of tokenizer_config.json: a string, {"content": ...} (AddedToken form) or null.
std::string config_token(const json& cfg, const char* key, const std::string& what) {
  if (!cfg.contains(key) || cfg[key].is_null()) return "";
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  fail("{}: \"{}\" must be a string, {{\"content\": ...}} or null", what, key);
}

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_word_byte(char c) {
  auto u = static_cast<unsigned char>(c);
  return std::isalnum(u) || c == '_' || u >= 0x80;
}

}  // namespace

struct Tokenizer::Impl {
  std::string what;  // "tokenizer.json at PATH", for messages
  tok::Normalizer normalizer;
  tok::PreTokenizer pre_tokenizer;
  tok::Decoder decoder;
  BpeModel model;
  std::vector<AddedToken> added;
  std::array<std::vector<uint32_t>, 256> added_by_byte;  // indices into added, longest first
  TokenMap added_map;
  std::vector<std::string> id_to_token;
  std::vector<uint8_t> known, special;
  std::vector<int32_t> prefix, suffix;  // what add_special puts around the ids
  std::optional<int32_t> bos, eos;
  std::string bos_token, eos_token, chat_template;

  void encode_plain(std::string_view seg, bool at_origin, std::vector<int32_t>& out) const;
  bool valid(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < known.size() && known[id];
  }
};

// ---- loading ----------------------------------------------------------------------------

Tokenizer Tokenizer::load(const std::filesystem::path& model_dir) {
  auto tj = model_dir / "tokenizer.json";
  if (!std::filesystem::exists(tj)) fail("{}: not found (a Hugging Face tokenizer.json is required)", tj.string());
  auto cfg = model_dir / "tokenizer_config.json";
  Tokenizer t = from_files(tj, std::filesystem::exists(cfg) ? cfg : std::filesystem::path());
  if (t.impl_->chat_template.empty() && std::filesystem::exists(model_dir / "chat_template.jinja")) {
    // Newer transformers write the template to its own file.
    auto impl = std::make_shared<Impl>(*t.impl_);
    std::ifstream f(model_dir / "chat_template.jinja", std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    impl->chat_template = ss.str();
    t.impl_ = std::move(impl);
  }
  return t;
}

Tokenizer Tokenizer::from_files(const std::filesystem::path& tokenizer_json,
                                const std::filesystem::path& tokenizer_config_json) {
  // NOTE: a field of the wrong JSON type (e.g. "add_prefix_space": "x") throws nlohmann's
  // type_error from deep in the pipeline parsers: it becomes an Error naming the files.
  try {
    return from_files_checked(tokenizer_json, tokenizer_config_json);
  } catch (const json::exception& e) {
    fail("{}{}: a field has the wrong type: {}", tokenizer_json.string(),
         tokenizer_config_json.empty() ? "" : " or " + tokenizer_config_json.string(), e.what());
  }
}

Tokenizer Tokenizer::from_files_checked(const std::filesystem::path& tokenizer_json,
                                        const std::filesystem::path& tokenizer_config_json) {
  auto impl = std::make_shared<Impl>();
  impl->what = tokenizer_json.string();
  const std::string& what = impl->what;
  json j = read_json(tokenizer_json);
  if (!j.is_object()) fail("{}: top level must be a JSON object", what);

  // Model.
  if (!j.contains("model") || !j["model"].is_object()) fail("{}: no \"model\" object", what);
  const json& m = j["model"];
  std::string type = m.contains("type") && m["type"].is_string() ? m["type"].get<std::string>()
                     : m.contains("merges")                      ? "BPE"
                                                                 : "(none)";
  if (type != "BPE") fail("{}: unsupported model type '{}' (only BPE is supported)", what, type);
  if (!m.contains("vocab") || !m["vocab"].is_object()) fail("{}: model.vocab must be an object", what);
  if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"].get<double>() != 0.0)
    fail("{}: model.dropout is set; BPE dropout is for training and is not supported", what);
  TokenMap vocab;
  vocab.reserve(m["vocab"].size());
  for (const auto& [tokstr, id] : m["vocab"].items()) {
    vocab.emplace(tokstr, tok::json_token_id(id, what, fmt::format("model.vocab['{}']", tokstr)));
  }
  std::vector<std::pair<std::string, std::string>> merges;
  if (m.contains("merges")) {
    if (!m["merges"].is_array()) fail("{}: model.merges must be a list", what);
    merges.reserve(m["merges"].size());
    for (const json& e : m["merges"]) {
      if (e.is_string()) {
        const std::string& s = e.get_ref<const std::string&>();
        size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          fail("{}: model.merges entry '{}' is not two tokens separated by one space", what, s);
        merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
      } else {
        fail("{}: model.merges entry {} is neither \"a b\" nor [a, b]", what, e.dump());
      }
    }
  }
  BpeOptions opts;
  if (m.contains("unk_token") && m["unk_token"].is_string()) opts.unk_token = m["unk_token"].get<std::string>();
  auto flag = [&](const char* k) { return m.contains(k) && m[k].is_boolean() && m[k].get<bool>(); };
  opts.fuse_unk = flag("fuse_unk");
  opts.byte_fallback = flag("byte_fallback");
  opts.ignore_merges = flag("ignore_merges");
  if (m.contains("continuing_subword_prefix") && m["continuing_subword_prefix"].is_string())
    opts.continuing_subword_prefix = m["continuing_subword_prefix"].get<std::string>();
  if (m.contains("end_of_word_suffix") && m["end_of_word_suffix"].is_string())
    opts.end_of_word_suffix = m["end_of_word_suffix"].get<std::string>();
  impl->model = BpeModel(std::move(vocab), merges, std::move(opts), what);

  // Added tokens.
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    if (!j["added_tokens"].is_array()) fail("{}: added_tokens must be a list", what);
    for (const json& a : j["added_tokens"]) {
      if (!a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") || !a["content"].is_string())
        fail("{}: added_tokens entry {} needs an integer \"id\" and a string \"content\"", what, a.dump());
      AddedToken t{tok::json_token_id(a["id"], what, "added_tokens id"), a["content"].get<std::string>()};
      if (t.content.empty() || t.id < 0) fail("{}: added_tokens entry {} is empty or has a negative id", what, a.dump());
      t.special = a.value("special", false);
      t.lstrip = a.value("lstrip", false);
      t.rstrip = a.value("rstrip", false);
      t.single_word = a.value("single_word", false);
      impl->added_map[t.content] = t.id;
      impl->added.push_back(std::move(t));
    }
  }
  for (uint32_t k = 0; k < impl->added.size(); ++k)
    impl->added_by_byte[static_cast<uint8_t>(impl->added[k].content[0])].push_back(k);
  for (auto& v : impl->added_by_byte)
    std::stable_sort(v.begin(), v.end(), [&](uint32_t a, uint32_t b) {
      return impl->added[a].content.size() > impl->added[b].content.size();
    });

  // id -> token table: the model's vocabulary, then added tokens (which win, as in HF).
  int32_t max_id = -1;
  for (const auto& [s, id] : impl->model.vocab()) max_id = std::max(max_id, id);
  for (const auto& t : impl->added) max_id = std::max(max_id, t.id);
  if (max_id >= (1 << 24)) fail("{}: token id {} is implausibly large", what, max_id);
  impl->id_to_token.resize(max_id + 1);
  impl->known.assign(max_id + 1, 0);
  impl->special.assign(max_id + 1, 0);
  for (const auto& [s, id] : impl->model.vocab()) {
    if (id < 0) fail("{}: model.vocab['{}'] has a negative id", what, s);
    impl->id_to_token[id] = s;
    impl->known[id] = 1;
  }
  for (const auto& t : impl->added) {
    impl->id_to_token[t.id] = t.content;
    impl->known[t.id] = 1;
    impl->special[t.id] = t.special;
  }

  // Pipeline.
  impl->normalizer = tok::Normalizer::parse(j.value("normalizer", json()), what);
  impl->pre_tokenizer = tok::PreTokenizer::parse(j.value("pre_tokenizer", json()), what);
  impl->decoder = tok::Decoder::parse(j.value("decoder", json()), what);
  auto post = tok::PostProcessor::parse(j.value("post_processor", json()), what);
  impl->prefix = post.prefix();
  impl->suffix = post.suffix();

  // tokenizer_config.json.
  if (!tokenizer_config_json.empty()) {
    std::string cwhat = tokenizer_config_json.string();
    json cfg = read_json(tokenizer_config_json);
    if (!cfg.is_object()) fail("{}: top level must be a JSON object", cwhat);
    impl->bos_token = config_token(cfg, "bos_token", cwhat);
    impl->eos_token = config_token(cfg, "eos_token", cwhat);
    Tokenizer probe(impl);
    if (!impl->bos_token.empty()) {
      impl->bos = probe.token_id(impl->bos_token);
      if (!impl->bos) fail("{}: bos_token '{}' is not in the vocabulary of {}", cwhat, impl->bos_token, what);
    }
    if (!impl->eos_token.empty()) {
      impl->eos = probe.token_id(impl->eos_token);
      if (!impl->eos) fail("{}: eos_token '{}' is not in the vocabulary of {}", cwhat, impl->eos_token, what);
    }
    // NOTE: an explicit add_bos_token / add_eos_token decides whether BOS / EOS is added,
    // whatever the post-processor says (transformers rebuilds the post-processor from these
    // flags for Llama-style tokenizers); without the flag the post-processor decides.
    auto apply_flag = [&](const char* key, const std::optional<int32_t>& id, std::vector<int32_t>& side, bool front) {
      if (!cfg.contains(key) || !cfg[key].is_boolean() || !id) return;
      bool want = cfg[key].get<bool>();
      bool has = !side.empty() && (front ? side.front() : side.back()) == *id;
      if (want && !has) side.insert(front ? side.begin() : side.end(), *id);
      if (!want) std::erase(side, *id);
    };
    apply_flag("add_bos_token", impl->bos, impl->prefix, true);
    apply_flag("add_eos_token", impl->eos, impl->suffix, false);
    if (cfg.contains("chat_template")) {
      const json& ct = cfg["chat_template"];
      if (ct.is_string()) {
        impl->chat_template = ct.get<std::string>();
      } else if (ct.is_array()) {
        // [{"name": ..., "template": ...}]: the one named "default", else the first.
        for (const json& e : ct) {
          if (!e.is_object() || !e.contains("template") || !e["template"].is_string())
            fail("{}: chat_template list entries need a \"template\" string", cwhat);
          if (impl->chat_template.empty() || e.value("name", "") == "default")
            impl->chat_template = e["template"].get<std::string>();
        }
      } else if (!ct.is_null()) {
        fail("{}: chat_template must be a string or a list of {{name, template}}", cwhat);
      }
    }
  }
  return Tokenizer(std::move(impl));
}

// ---- encoding ---------------------------------------------------------------------------

void Tokenizer::Impl::encode_plain(std::string_view seg, bool at_origin, std::vector<int32_t>& out) const {
  std::vector<tok::Piece> pieces;
  pieces.push_back(tok::Piece{normalizer.apply(std::string(seg)), at_origin});
  if (pieces[0].text.empty()) return;
  pre_tokenizer.apply(pieces);
  for (const tok::Piece& p : pieces) model.tokenize(p.text, out);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special) const {
  const Impl& im = *impl_;
  if (text.size() > kMaxEncodeBytes)
    fail("Tokenizer::encode: the input is {} bytes, more than the tokenizer input limit of {} bytes "
         "(Tokenizer::kMaxEncodeBytes)",
         text.size(), kMaxEncodeBytes);
  size_t bad = utf8::first_invalid(text);
  if (bad != text.size()) fail("Tokenizer::encode: input is not valid UTF-8 (byte {})", bad);

  std::vector<int32_t> ids;
  if (add_special) ids = im.prefix;
  ids.reserve(ids.size() + text.size() / 3 + 8);

  // Split on added tokens: at each position the longest one that matches (leftmost first).
  size_t start = 0, i = 0;
  const size_t n = text.size();
  while (i < n) {
    const AddedToken* hit = nullptr;
    for (uint32_t k : im.added_by_byte[static_cast<uint8_t>(text[i])]) {
      const AddedToken& t = im.added[k];
      if (text.compare(i, t.content.size(), t.content) != 0) continue;
      if (t.single_word) {
        size_t e = i + t.content.size();
        if ((i > 0 && is_word_byte(text[i - 1])) || (e < n && is_word_byte(text[e]))) continue;
      }
      hit = &t;
      break;
    }
    if (!hit) {
      ++i;
      continue;
    }
    size_t b = i, e = i + hit->content.size();
    if (hit->lstrip)
      while (b > start && is_ascii_space(text[b - 1])) --b;
    if (hit->rstrip)
      while (e < n && is_ascii_space(text[e])) ++e;
    if (b > start) im.encode_plain(text.substr(start, b - start), start == 0, ids);
    ids.push_back(hit->id);
    start = i = e;
  }
  if (start < n) im.encode_plain(text.substr(start), start == 0, ids);

  if (add_special) ids.insert(ids.end(), im.suffix.begin(), im.suffix.end());
  return ids;
}

// ---- decoding ---------------------------------------------------------------------------

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  const Impl& im = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (!im.valid(id) || (skip_special && im.special[id])) continue;
    tokens.push_back(im.id_to_token[id]);
  }
  return utf8::lossy(im.decoder.decode(std::move(tokens)));
}

std::string Tokenizer::token_piece(int32_t id) const {
  if (!impl_->valid(id)) return "";
  return impl_->decoder.piece(impl_->id_to_token[id]);
}

Tokenizer::StreamDecoder::StreamDecoder(const Tokenizer& tok, bool skip_special)
    : impl_(tok.impl_), skip_special_(skip_special), strip_left_(tok.impl_->decoder.leading_strip()) {}

std::string Tokenizer::StreamDecoder::push(int32_t id) {
  if (!impl_->valid(id) || (skip_special_ && impl_->special[id])) return "";
  pending_ += impl_->decoder.piece(impl_->id_to_token[id]);
  while (strip_left_ > 0 && !pending_.empty()) {
    if (pending_[0] != ' ') {
      strip_left_ = 0;
      break;
    }
    pending_.erase(0, 1);
    --strip_left_;
  }
  // Hold back a trailing character that more bytes could still complete.
  size_t hold = pending_.size();
  for (size_t k = pending_.size() >= 3 ? pending_.size() - 3 : 0; k < pending_.size(); ++k) {
    if (utf8::incomplete_prefix_len(pending_, k) > 0) {
      hold = k;
      break;
    }
  }
  std::string out = utf8::lossy(std::string_view(pending_).substr(0, hold));
  pending_.erase(0, hold);
  return out;
}

std::string Tokenizer::StreamDecoder::flush() {
  std::string out = utf8::lossy(pending_);
  pending_.clear();
  return out;
}

// ---- lookups ----------------------------------------------------------------------------

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->id_to_token.size()); }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos; }

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  auto it = impl_->added_map.find(token);
  if (it != impl_->added_map.end()) return it->second;
  return impl_->model.token_to_id(token);
}

std::string Tokenizer::token_text(int32_t id) const {
  return impl_->valid(id) ? impl_->id_to_token[id] : std::string();
}

bool Tokenizer::is_special(int32_t id) const { return impl_->valid(id) && impl_->special[id]; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }

Tokenizer Tokenizer::with_chat_template(std::string chat_template) const {
  auto impl = std::make_shared<Impl>(*impl_);
  impl->chat_template = std::move(chat_template);
  return Tokenizer(std::move(impl));
}
std::string Tokenizer::bos_token() const { return impl_->bos_token; }
std::string Tokenizer::eos_token() const { return impl_->eos_token; }

}  // namespace ninfer
