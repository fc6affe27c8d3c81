// A forest of regression trees read from an XGBoost JSON model and evaluated here: ranking a variant space walks
// ~900 trees for ~175 rows, which XGBoost's own predictor does at ~30 ns a tree and row (one row's walk is a chain of
// dependent loads and mispredicted branches) behind a global lock. This walks a block of rows through each tree at
// once, a fixed number of branch-free steps (leaves lead to themselves), so the rows' chains overlap; and it needs
// neither XGBoost nor a lock to predict.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "generator/core/error.hpp"

namespace tessera {

class TreeEnsemble {
 public:
  // The trees of an XGBoost "gbtree" model saved as JSON (numerical splits only) for rows of `features` columns.
  // Throws InvalidArgument naming `what` when the document is not such a model or its trees are malformed.
  static TreeEnsemble from_xgboost_json(const nlohmann::json& model, std::size_t features, const char* what);

  // The same forest in tessera's own compact form (what a cost model file keeps): the nodes of every tree in turn,
  // each array (left and right children within the tree, -1 at a leaf; split feature; threshold or leaf value; where
  // a missing value goes) one base64 string of its binary values, and the node count of each tree.
  nlohmann::json to_json() const;
  static TreeEnsemble from_json(const nlohmann::json& document, std::size_t features, const char* what);

  // The raw margin of each row (base score plus the sum of the leaves it reaches): what XGBoost predicts for
  // reg:squarederror and rank:* objectives. `rows` is row-major, `count` × the model's feature count.
  std::vector<double> predict(const float* rows, std::size_t count) const;

  std::size_t trees() const { return roots_.size(); }

 private:
  struct Node {
    std::uint32_t feature;   // the feature split on (0 for a leaf); the high bit set when a missing value goes left
    float value;             // split threshold (left when the feature is below it), or the leaf's value
    std::uint32_t child[2];  // [0] right, [1] left; a leaf's both are itself
  };
  static constexpr std::uint32_t kMissingLeft = 0x80000000u;
  void add_tree(const std::vector<std::int64_t>& left, const std::vector<std::int64_t>& right,
                const std::vector<std::int64_t>& feature, const std::vector<float>& value,
                const std::vector<int>& missing_left, const std::function<InvalidArgument(std::string)>& bad);
  std::vector<Node> nodes_;
  std::vector<std::uint32_t> roots_, depths_;  // per tree: its root and the steps from it to its deepest leaf
  std::size_t features_ = 0;
  double base_score_ = 0;
};

}  // namespace tessera
