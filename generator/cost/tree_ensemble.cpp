#include "generator/cost/tree_ensemble.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "generator/core/error.hpp"
#include "generator/cost/base64.hpp"

namespace tessera {

namespace {
// The compact form keeps each node array as one base64 string of little-endian values (int32 children and features,
// float32 thresholds and leaves, one byte per missing-value direction), concatenated over the trees.
static_assert(std::endian::native == std::endian::little, "forest arrays are stored little-endian");
constexpr const char* kEncoding = "base64 little-endian";

template <typename T>
std::vector<T> decoded(const nlohmann::json& document, const char* key, std::size_t count,
                       const std::function<InvalidArgument(std::string)>& bad) {
  const auto bytes = base64_decode(document.at(key).get_ref<const std::string&>());
  if (!bytes) throw bad(fmt::format("'{}' is not base64", key));
  if (bytes->size() != count * sizeof(T))
    throw bad(fmt::format("'{}' holds {} bytes, not the {} of {} nodes", key, bytes->size(), count * sizeof(T), count));
  std::vector<T> out(count);
  std::memcpy(out.data(), bytes->data(), bytes->size());
  return out;
}

// The elements of a JSON array, each converted by `element` (nullopt: out of range, and the file is refused, naming
// the key and the value). nlohmann's own conversions cast a float or a too-large integer (a file's 9.2e18 nodes)
// without a check, which is undefined.
template <typename T, typename Element>
std::vector<T> checked_array(const nlohmann::json& array, const char* key, const char* what,
                             const std::function<InvalidArgument(std::string)>& bad, Element element) {
  if (!array.is_array()) throw bad(fmt::format("'{}' is not an array", key));
  std::vector<T> out;
  out.reserve(array.size());
  for (const nlohmann::json& v : array) {
    const std::optional<T> x = element(v);
    if (!x) throw bad(fmt::format("'{}' holds {}, not {}", key, v.dump(), what));
    out.push_back(*x);
  }
  return out;
}

// Integers each in T's range.
template <typename T>
std::vector<T> integers(const nlohmann::json& array, const char* key,
                        const std::function<InvalidArgument(std::string)>& bad) {
  return checked_array<T>(array, key, "an integer in range", bad, [](const nlohmann::json& v) -> std::optional<T> {
    if (v.is_number_unsigned() && v.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
      return static_cast<T>(v.get<std::uint64_t>());
    if (v.is_number_integer() && !v.is_number_unsigned() && v.get<std::int64_t>() >= std::numeric_limits<T>::min() &&
        v.get<std::int64_t>() <= std::numeric_limits<T>::max())
      return static_cast<T>(v.get<std::int64_t>());
    return std::nullopt;
  });
}

// Numbers each within float's range (a double beyond it does not convert).
std::vector<float> floats(const nlohmann::json& array, const char* key,
                          const std::function<InvalidArgument(std::string)>& bad) {
  return checked_array<float>(array, key, "a float", bad, [](const nlohmann::json& v) -> std::optional<float> {
    if (!v.is_number() || !(std::abs(v.get<double>()) <= std::numeric_limits<float>::max())) return std::nullopt;
    return static_cast<float>(v.get<double>());
  });
}
}  // namespace

void TreeEnsemble::add_tree(const std::vector<std::int64_t>& left, const std::vector<std::int64_t>& right,
                            const std::vector<std::int64_t>& feature, const std::vector<float>& value,
                            const std::vector<int>& missing_left,
                            const std::function<InvalidArgument(std::string)>& bad) {
  const std::size_t n = left.size();
  if (n == 0 || right.size() != n || feature.size() != n || value.size() != n || missing_left.size() != n)
    throw bad("a tree's node arrays differ in length");
  const auto base = static_cast<std::uint32_t>(nodes_.size());
  roots_.push_back(base);
  std::vector<std::uint32_t> depth(n, 0);
  std::uint32_t deepest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto self = base + static_cast<std::uint32_t>(i);
    Node node{0, value[i], {self, self}};
    if (left[i] != -1) {
      // XGBoost numbers children after their parent: a forward-only walk always ends at a leaf.
      const auto in_tree = [&](std::int64_t child) {
        return child > static_cast<std::int64_t>(i) && child < static_cast<std::int64_t>(n);
      };
      if (!in_tree(left[i]) || !in_tree(right[i])) throw bad(fmt::format("node {} has children outside", i));
      if (feature[i] < 0 || static_cast<std::size_t>(feature[i]) >= features_)
        throw bad(fmt::format("node {} splits on feature {} of {}", i, feature[i], features_));
      node.feature = static_cast<std::uint32_t>(feature[i]) | (missing_left[i] ? kMissingLeft : 0u);
      node.child[1] = base + static_cast<std::uint32_t>(left[i]);
      node.child[0] = base + static_cast<std::uint32_t>(right[i]);
      depth[static_cast<std::size_t>(left[i])] = depth[static_cast<std::size_t>(right[i])] = depth[i] + 1;
    }
    deepest = std::max(deepest, depth[i]);
    nodes_.push_back(node);
  }
  depths_.push_back(deepest);
}

TreeEnsemble TreeEnsemble::from_xgboost_json(const nlohmann::json& model, std::size_t features, const char* what) {
  const std::function<InvalidArgument(std::string)> bad = [&](const std::string& why) {
    return InvalidArgument(what, "not a usable XGBoost model: " + why);
  };
  TreeEnsemble forest;
  forest.features_ = features;
  try {
    const nlohmann::json& learner = model.at("learner");
    if (learner.at("gradient_booster").at("name") != "gbtree") throw bad("only gbtree boosters are read");
    forest.base_score_ = std::stod(learner.at("learner_model_param").at("base_score").get<std::string>());
    for (const nlohmann::json& tree : learner.at("gradient_booster").at("model").at("trees")) {
      if (tree.contains("split_type"))
        for (int type : integers<int>(tree.at("split_type"), "split_type", bad))
          if (type != 0) throw bad("categorical splits are not read");
      forest.add_tree(integers<std::int64_t>(tree.at("left_children"), "left_children", bad),
                      integers<std::int64_t>(tree.at("right_children"), "right_children", bad),
                      integers<std::int64_t>(tree.at("split_indices"), "split_indices", bad),
                      floats(tree.at("split_conditions"), "split_conditions", bad),
                      integers<int>(tree.at("default_left"), "default_left", bad), bad);
    }
  } catch (const nlohmann::json::exception& e) {
    throw bad(e.what());
  } catch (const std::logic_error& e) {  // std::stod of a base score that is no number
    throw bad(e.what());
  }
  if (forest.roots_.empty()) throw bad("it has no trees");
  return forest;
}

TreeEnsemble TreeEnsemble::from_json(const nlohmann::json& document, std::size_t features, const char* what) {
  const std::function<InvalidArgument(std::string)> bad = [&](const std::string& why) {
    return InvalidArgument(what, "not a usable forest: " + why);
  };
  TreeEnsemble forest;
  forest.features_ = features;
  try {
    if (document.at("format") != "tessera-forest") throw bad("format is not tessera-forest");
    if (document.at("encoding") != kEncoding) throw bad(fmt::format("encoding is not '{}'", kEncoding));
    forest.base_score_ = document.at("base_score").get<double>();
    const auto sizes = integers<std::int64_t>(document.at("nodes_per_tree"), "nodes_per_tree", bad);
    std::size_t total = 0;
    for (std::int64_t n : sizes) {
      if (n < 1 || n > (1 << 24)) throw bad(fmt::format("a tree of {} nodes", n));
      total += static_cast<std::size_t>(n);
    }
    const auto left = decoded<std::int32_t>(document, "left", total, bad);
    const auto right = decoded<std::int32_t>(document, "right", total, bad);
    const auto feature = decoded<std::int32_t>(document, "feature", total, bad);
    const auto value = decoded<float>(document, "value", total, bad);
    const auto missing_left = decoded<std::uint8_t>(document, "missing_left", total, bad);
    std::size_t at = 0;
    for (std::int64_t n : sizes) {
      const auto slice = [&](const auto& v) {
        using T = typename std::decay_t<decltype(v)>::value_type;
        using Out = std::conditional_t<std::is_same_v<T, float>, float,
                                       std::conditional_t<std::is_same_v<T, std::uint8_t>, int, std::int64_t>>;
        return std::vector<Out>(v.begin() + static_cast<std::ptrdiff_t>(at),
                                v.begin() + static_cast<std::ptrdiff_t>(at) + n);
      };
      forest.add_tree(slice(left), slice(right), slice(feature), slice(value), slice(missing_left), bad);
      at += static_cast<std::size_t>(n);
    }
  } catch (const nlohmann::json::exception& e) {
    throw bad(e.what());
  }
  if (forest.roots_.empty()) throw bad("it has no trees");
  return forest;
}

nlohmann::json TreeEnsemble::to_json() const {
  std::vector<std::int64_t> sizes;
  std::vector<std::int32_t> left, right, feature;
  std::vector<float> value;
  std::vector<std::uint8_t> missing_left;
  for (std::size_t t = 0; t < roots_.size(); ++t) {
    const std::uint32_t base = roots_[t];
    const auto end = static_cast<std::uint32_t>(t + 1 < roots_.size() ? roots_[t + 1] : nodes_.size());
    sizes.push_back(end - base);
    for (std::uint32_t i = base; i < end; ++i) {
      const Node& node = nodes_[i];
      const bool leaf = node.child[0] == i;
      left.push_back(leaf ? -1 : static_cast<std::int32_t>(node.child[1] - base));
      right.push_back(leaf ? -1 : static_cast<std::int32_t>(node.child[0] - base));
      feature.push_back(static_cast<std::int32_t>(node.feature & ~kMissingLeft));
      value.push_back(node.value);
      missing_left.push_back((node.feature & kMissingLeft) != 0 ? 1 : 0);
    }
  }
  const auto encoded = [](const auto& v) { return base64_encode(v.data(), v.size() * sizeof(v[0])); };
  return {{"format", "tessera-forest"},  {"encoding", kEncoding},   {"base_score", base_score_},
          {"nodes_per_tree", sizes},     {"left", encoded(left)},   {"right", encoded(right)},
          {"feature", encoded(feature)}, {"value", encoded(value)}, {"missing_left", encoded(missing_left)}};
}

std::vector<double> TreeEnsemble::predict(const float* rows, std::size_t count) const {
  // Leaves are summed in float, tree by tree, as XGBoost does. Each tree is walked by all rows while its nodes are in
  // L1, kLanes rows in step: their walks are independent chains of loads the core overlaps.
  constexpr std::size_t kLanes = 8;
  if (count == 0) return {};
  const std::size_t padded = (count + kLanes - 1) / kLanes * kLanes;
  // Rows padded with copies of the last one, so every group is full.
  std::vector<float> data(rows, rows + count * features_);
  for (std::size_t r = count; r < padded; ++r)
    data.insert(data.end(), rows + (count - 1) * features_, rows + count * features_);
  std::vector<float> sums(padded, 0.0f);
  for (std::size_t t = 0; t < roots_.size(); ++t)
    for (std::size_t group = 0; group < padded; group += kLanes) {
      const float* block = data.data() + group * features_;
      std::uint32_t at[kLanes];
      std::fill_n(at, kLanes, roots_[t]);
      for (std::uint32_t step = 0; step < depths_[t]; ++step) {
#pragma GCC unroll 8
        for (std::size_t lane = 0; lane < kLanes; ++lane) {
          const Node& node = nodes_[at[lane]];
          const float x = block[lane * features_ + (node.feature & ~kMissingLeft)];
          // Flags, not branches: which way a row goes is data, and a mispredicted branch costs more than a step.
          const unsigned below = x < node.value, missing = std::isnan(x), missing_left = node.feature >> 31;
          at[lane] = node.child[below | (missing & missing_left)];
        }
      }
      for (std::size_t lane = 0; lane < kLanes; ++lane) sums[group + lane] += nodes_[at[lane]].value;
    }
  std::vector<double> out(count);
  for (std::size_t r = 0; r < count; ++r) out[r] = static_cast<double>(sums[r]) + base_score_;
  return out;
}

}  // namespace tessera
