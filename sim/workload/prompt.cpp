#include "sim/workload/prompt.h"

#include "sim/base/hex64.h"
#include "sim/base/json_reader.h"
#include "sim/base/rng.h"
#include "sim/workload/mooncake.h"
#include "sim/workload/workload.h"

namespace kvsim::sim {

const std::vector<Token>& Tokens::vec() const {
  static const std::vector<Token> kEmpty;
  return p_ ? *p_ : kEmpty;
}

std::vector<Token>& Tokens::mut() {
  if (!p_ || p_.use_count() > 1) {
    p_ = std::make_shared<std::vector<Token>>(p_ ? *p_ : std::vector<Token>{});
  }
  return *p_;  // sole owner: editing in place changes nobody else's tokens
}

int64_t recipe_length(const PromptRecipe& recipe) {
  int64_t n = 0;
  for (const PromptSegment& s : recipe)
    n += s.n;
  return n;
}

PromptRecipe recipe_prefix(const PromptRecipe& recipe, int64_t n) {
  PromptRecipe out;
  for (const PromptSegment& s : recipe) {
    if (n <= 0) break;
    PromptSegment cut = s;
    if (s.n > n) {
      cut.n = n;
      if (s.kind == PromptSegment::Kind::kTokens) {
        cut.items.resize(static_cast<size_t>(n));
      } else if (s.kind == PromptSegment::Kind::kMooncake) {
        const auto bt = static_cast<int64_t>(s.value);
        cut.items.resize(static_cast<size_t>((n + bt - 1) / bt));
      }
    }
    n -= cut.n;
    out.push_back(std::move(cut));
  }
  return out;
}

void expand_recipe(const PromptRecipe& recipe, std::vector<Token>& out) {
  out.reserve(out.size() + static_cast<size_t>(recipe_length(recipe)));
  for (const PromptSegment& s : recipe) {
    switch (s.kind) {
      case PromptSegment::Kind::kTokens:
        for (int64_t t : s.items)
          out.push_back(static_cast<Token>(t));
        break;
      case PromptSegment::Kind::kRng: {
        Rng rng(s.value);  // Rng's state is its seed: see Rng::state()
        for (int64_t i = 0; i < s.n; ++i)
          out.push_back(static_cast<Token>(rng.below(static_cast<uint64_t>(s.vocab))));
        break;
      }
      case PromptSegment::Kind::kOutputs:
        for (int64_t i = 0; i < s.n; ++i)
          out.push_back(output_token(static_cast<RequestId>(s.value), static_cast<size_t>(i)));
        break;
      case PromptSegment::Kind::kMooncake: {
        const size_t end = out.size() + static_cast<size_t>(s.n);
        for (int64_t id : s.items) {
          append_mooncake_block(id, static_cast<int64_t>(s.value), out);
          if (out.size() >= end) break;
        }
        out.resize(end);
        break;
      }
    }
  }
}

Tokens expand_recipe(const PromptRecipe& recipe) {
  std::vector<Token> out;
  expand_recipe(recipe, out);
  return Tokens(std::move(out));
}

nlohmann::json recipe_json(const PromptRecipe& recipe) {
  nlohmann::json arr = nlohmann::json::array();
  for (const PromptSegment& s : recipe) {
    switch (s.kind) {
      case PromptSegment::Kind::kTokens:
        arr.push_back({{"tokens", s.items}});
        break;
      case PromptSegment::Kind::kRng:
        if (s.vocab == kPromptVocab) {  // the default is not written: older readers take it
          arr.push_back({{"rng", hex64(s.value)}, {"n", s.n}});
        } else {
          arr.push_back({{"rng", hex64(s.value)}, {"n", s.n}, {"vocab", s.vocab}});
        }
        break;
      case PromptSegment::Kind::kOutputs:
        arr.push_back({{"out", s.value}, {"n", s.n}});
        break;
      case PromptSegment::Kind::kMooncake:
        arr.push_back({{"mooncake", s.items}, {"block_tokens", s.value}, {"len", s.n}});
        break;
    }
  }
  return arr;
}

PromptRecipe recipe_from_json(const nlohmann::json& j, const std::string& where,
                              const std::string& field) {
  auto fail = [&](const std::string& f, const std::string& problem) {
    throw InputError(where + ": field " + f + ": " + problem);
  };
  if (!j.is_array()) fail(field, "expected an array of prompt segments");
  if (j.empty()) fail(field, "is empty");
  PromptRecipe recipe;
  int64_t total = 0;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string path = field + "[" + std::to_string(i) + "]";
    if (!j[i].is_object()) fail(path, "expected an object");
    JsonReader r(j[i], where, path);
    PromptSegment s;
    if (r.has("tokens")) {
      s.kind = PromptSegment::Kind::kTokens;
      s.items = r.integer_array("tokens", 0, INT32_MAX);
      s.n = static_cast<int64_t>(s.items.size());
    } else if (r.has("rng")) {
      s.kind = PromptSegment::Kind::kRng;
      const std::string state = r.required_string("rng");
      if (state.size() != 16 || state.find_first_not_of("0123456789abcdef") != std::string::npos) {
        r.fail("rng", "expected 16 lowercase hex digits");
      }
      s.value = std::stoull(state, nullptr, 16);
      s.n = r.required_integer("n", 1, kMaxPromptTokens);
      s.vocab = r.integer("vocab", kPromptVocab, 1, INT32_MAX);
    } else if (r.has("out")) {
      s.kind = PromptSegment::Kind::kOutputs;
      s.value = static_cast<uint64_t>(r.required_integer("out", 1, INT64_MAX));
      s.n = r.required_integer("n", 1, kMaxPromptTokens);
    } else if (r.has("mooncake")) {
      s.kind = PromptSegment::Kind::kMooncake;
      s.items = r.integer_array("mooncake", 0, INT64_MAX);
      s.value = static_cast<uint64_t>(r.required_integer("block_tokens", 1, int64_t{1} << 20));
      s.n = r.required_integer("len", 1, kMaxPromptTokens);
      const auto bt = static_cast<int64_t>(s.value);
      const auto blocks = static_cast<size_t>((s.n + bt - 1) / bt);
      if (s.items.size() != blocks) {
        r.fail("mooncake", "has " + std::to_string(s.items.size()) + " ids but len " +
                               std::to_string(s.n) + " needs " + std::to_string(blocks) +
                               " blocks of " + std::to_string(bt));
      }
    } else {
      fail(path, "expected one of tokens, rng, out, mooncake");
    }
    r.finish();
    if (s.n == 0) fail(path, "contributes no tokens");
    total += s.n;
    if (total > kMaxPromptTokens) {
      fail(field, "describes more than " + std::to_string(kMaxPromptTokens) + " tokens");
    }
    recipe.push_back(std::move(s));
  }
  return recipe;
}

}  // namespace kvsim::sim
