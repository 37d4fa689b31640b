// `ninfer needle`: multi-needle retrieval through the model's chat template.
// Each trial builds a user message of haystack text with 1..6 sentences "The secret number
// for NAME is DIGITS." at random depths, asks "What is the secret number for NAME?" about
// one of them, decodes greedily and scores an exact match of the digits. Chat lengths are
// the requested totals (prompt tokens, within a few tokens).
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "apps/ninfer/command.h"
#include "core/error.h"
#include "model/config.h"

namespace ninfer::app {
namespace {

// NOTE: names the reference models handle: ref-qwen3-d256 was trained on needle chats with a
// fixed name list, and out-of-list names (e.g. Felix, Idris) make it answer with another name
// and garble the first digit. This list was read off the model by sampling
// "The secret number for" at temperature 1 (121 seeds); every name here was produced.
const char* const kNames[] = {
    "Dmitri", "Igor", "Wanda", "Tomas", "Kamal", "Greta", "Yusuf", "Xavier", "Mateo", "Gustav",
    "Farid", "Carmen", "Uma", "Samir", "Leila", "Julia", "Dalia", "Bruno", "Oscar", "Nadia",
    "Hana", "Emil", "Elena", "Caleb", "Zara", "Rosa", "Marco", "Kofi", "Jonas", "Ines", "Hiro",
    "Anton", "Alice"};

struct NeedleCmd {
  EngineFlags ef;
  std::vector<int> lengths{512, 1024, 2048, 4000};
  int trials = 40;
  std::string needles = "1..6";
  std::string haystack;
  uint64_t seed = 1234;
  bool json = false;
  bool verbose = false;
};

std::pair<int, int> parse_range(const std::string& s) {
  auto dots = s.find("..");
  try {
    if (dots == std::string::npos) {
      int v = std::stoi(s);
      return {v, v};
    }
    return {std::stoi(s.substr(0, dots)), std::stoi(s.substr(dots + 2))};
  } catch (...) {
    fail("--needles must be N or LO..HI (e.g. 1..6), got '{}'", s);
  }
}

std::string first_digits(const std::string& s) {
  size_t i = s.find_first_of("0123456789");
  if (i == std::string::npos) return "";
  size_t j = s.find_first_not_of("0123456789", i);
  return s.substr(i, j == std::string::npos ? std::string::npos : j - i);
}

RegisterCommand reg("needle", "multi-needle retrieval accuracy through the chat template", [](CLI::App* app) {
  auto c = std::make_shared<NeedleCmd>();
  c->ef.add(app);
  app->add_option("--lengths", c->lengths, "total chat lengths in tokens")->delimiter(',')->capture_default_str();
  app->add_option("--trials", c->trials, "trials per length")->capture_default_str();
  app->add_option("--needles", c->needles, "needles per chat: N or LO..HI")->capture_default_str();
  app->add_option("--haystack", c->haystack, "haystack text file (default: ../shared/corpus/sotu_dev.txt)");
  app->add_option("--seed", c->seed, "random seed")->capture_default_str();
  app->add_flag("--json", c->json, "print one JSON object");
  app->add_flag("-v,--verbose", c->verbose, "print every trial's answer");
  app->callback([c]() {
    auto [lo, hi] = parse_range(c->needles);
    if (lo < 1 || hi < lo || hi > int(std::size(kNames))) fail("--needles must be within 1..{}, got '{}'", std::size(kNames), c->needles);
    if (c->trials < 1) fail("--trials must be >= 1, got {}", c->trials);
    if (c->lengths.empty()) fail("--lengths is empty");
    int max_len = 0;
    for (int L : c->lengths) {
      if (L < 128) fail("--lengths: {} is too short for a needle chat (min 128)", L);
      max_len = std::max(max_len, L);
    }
    if (c->haystack.empty()) {
      c->haystack = "../shared/corpus/sotu_dev.txt";
      if (!std::filesystem::exists(c->haystack)) fail("no --haystack given and {} not found", c->haystack);
      std::fprintf(stderr, "needle: haystack %s\n", c->haystack.c_str());
    }
    EngineOptions o = c->ef.options();
    if (o.max_context == 0) o.max_context = max_len + 64;
    o.allow_long_context = true;  // the lengths are this tool's own flags (a warning names them)
    if (o.kv_capacity == 0) o.kv_capacity = o.max_context;  // one chat at a time
    auto eng = Engine::create(c->ef.model_dir, o);
    const Tokenizer& tok = eng->tokenizer();
    std::vector<int32_t> hay = tok.encode(read_file(c->haystack), false);
    if (int(hay.size()) < max_len + 100) fail("{}: {} tokens, too short for length {}", c->haystack, hay.size(), max_len);

    std::map<int, std::pair<int, int>> by_len;    // length -> (correct, total)
    std::map<int, std::pair<int, int>> by_depth;  // depth bucket (0..4) -> (correct, total)
    int correct = 0, total = 0;
    GenerateOptions g;
    g.max_new_tokens = 24;
    for (int L : c->lengths) {
      for (int t = 0; t < c->trials; ++t) {
        std::mt19937_64 rng(c->seed * 1000003u + uint64_t(L) * 7919u + uint64_t(t));
        const int n = std::uniform_int_distribution<int>(lo, hi)(rng);
        std::vector<int> idx(std::size(kNames));
        for (size_t i = 0; i < idx.size(); ++i) idx[i] = int(i);
        std::shuffle(idx.begin(), idx.end(), rng);
        struct Needle { std::string name, digits; double depth; };
        std::vector<Needle> nd;
        std::set<int> used_digits;
        for (int i = 0; i < n; ++i) {
          int d;
          do d = std::uniform_int_distribution<int>(10000, 99999)(rng); while (!used_digits.insert(d).second);
          nd.push_back({kNames[idx[size_t(i)]], std::to_string(d), std::uniform_real_distribution<double>(0, 1)(rng)});
        }
        const Needle& q = nd[size_t(std::uniform_int_distribution<int>(0, n - 1)(rng))];
        const size_t start = std::uniform_int_distribution<size_t>(0, hay.size() - size_t(max_len) - 50)(rng);
        int h_tokens = L - 20 - 14 * n;  // first guess; corrected below
        std::vector<int32_t> ids;
        for (int iter = 0; iter < 4; ++iter) {
          h_tokens = std::max(16, h_tokens);
          std::string text = tok.decode(std::span<const int32_t>(hay.data() + start, size_t(h_tokens)));
          // Start at a word boundary.
          size_t sp = text.find(' ');
          if (sp != std::string::npos && sp < 40) text = text.substr(sp + 1);
          // Insert needles deepest first so earlier offsets stay valid.
          std::vector<const Needle*> order;
          for (const Needle& x : nd) order.push_back(&x);
          std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->depth > b->depth; });
          for (const Needle* x : order) {
            size_t at = size_t(x->depth * double(text.size()));
            size_t b = text.find(". ", at);
            at = b == std::string::npos ? text.size() : b + 2;
            text.insert(at, "The secret number for " + x->name + " is " + x->digits + ". ");
          }
          std::string user = text + "\n\nWhat is the secret number for " + q.name + "?";
          ids = eng->encode_chat({{"user", user}});
          const int diff = L - int(ids.size());
          if (std::abs(diff) <= 2) break;
          h_tokens += diff;
        }
        GenerateResult r = eng->generate(ids, g);
        const bool ok = first_digits(r.text) == q.digits;
        const int bucket = std::min(4, int(q.depth * 5));
        by_len[L].first += ok;
        by_len[L].second += 1;
        by_depth[bucket].first += ok;
        by_depth[bucket].second += 1;
        correct += ok;
        ++total;
        if (c->verbose)
          std::fprintf(stderr, "len %d (%zu) trial %d needles %d depth %.2f want %s got '%s' %s\n", L, ids.size(), t,
                       n, q.depth, q.digits.c_str(), r.text.c_str(), ok ? "ok" : "MISS");
        std::fprintf(stderr, "\rneedle: length %d trial %d/%d  accuracy so far %.3f   ", L, t + 1, c->trials,
                     double(by_len[L].first) / by_len[L].second);
        std::fflush(stderr);
      }
      std::fprintf(stderr, "\n");
    }
    nlohmann::json j = {{"model", eng->model().dir.filename().string()},
                        {"kv_dtype", std::string(eng->kv_format().name)},
                        {"kv_sink", eng->kv_window().sink},
                        {"kv_recent", eng->kv_window().recent},
                        {"trials", c->trials},
                        {"needles", c->needles},
                        {"seed", c->seed},
                        {"accuracy", double(correct) / total}};
    for (auto& [L, ct] : by_len) j["by_length"][std::to_string(L)] = double(ct.first) / ct.second;
    for (auto& [b, ct] : by_depth)
      j["by_depth"][fmt::format("{}-{}%", b * 20, b * 20 + 20)] = {{"accuracy", double(ct.first) / ct.second},
                                                                  {"n", ct.second}};
    if (c->json) {
      std::printf("%s\n", j.dump(2).c_str());
      return;
    }
    std::printf("needle | %s | kv %s | %d trials per length | needles %s\n", eng->model().dir.filename().c_str(),
                std::string(eng->kv_format().name).c_str(), c->trials, c->needles.c_str());
    std::printf("%-10s %10s\n", "length", "accuracy");
    for (auto& [L, ct] : by_len) std::printf("%-10d %10.3f\n", L, double(ct.first) / ct.second);
    std::printf("%-10s %10s %6s\n", "depth", "accuracy", "n");
    for (auto& [b, ct] : by_depth)
      std::printf("%3d-%3d%%   %10.3f %6d\n", b * 20, b * 20 + 20, double(ct.first) / ct.second, ct.second);
    std::printf("overall    %10.3f\n", double(correct) / total);
  });
});

}  // namespace
}  // namespace ninfer::app
