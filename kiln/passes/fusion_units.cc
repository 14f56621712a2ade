#include "kiln/passes/fusion_units.h"

#include <algorithm>
#include <queue>
#include <unordered_map>

#include "kiln/ir/error.h"

namespace kiln::passes {
namespace {

void add_unique(std::vector<int>& v, int x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

}  // namespace

FusionUnits::FusionUnits(std::vector<ir::Node*> nodes, std::vector<std::vector<int>> succ)
    : nodes_(std::move(nodes)), succ_(std::move(succ)) {
  const size_t n = nodes_.size();
  succ_.resize(n);
  users_.resize(n);
  producers_.resize(n);
  pred_.resize(n);
  home_.assign(n, -1);
  copies_.resize(n);
  node_mark_.assign(n, 0);
  std::unordered_map<const ir::Node*, int>& pos = position_;
  pos.reserve(n);
  for (size_t i = 0; i < n; ++i) pos.emplace(nodes_[i], int(i));
  for (size_t i = 0; i < n; ++i)
    for (const ir::Value* v : nodes_[i]->inputs())
      if (const ir::Node* p = v->producer(); p != nullptr)
        if (auto it = pos.find(p); it != pos.end()) {
          add_unique(users_[size_t(it->second)], int(i));
          add_unique(producers_[i], it->second);
        }
  for (size_t i = 0; i < n; ++i)
    for (int s : succ_[i]) add_unique(pred_[size_t(s)], int(i));
  initial_ranks();
}

void FusionUnits::initial_ranks() {
  const size_t n = nodes_.size();
  node_rank_.resize(n);
  bool in_order = true;
  for (size_t i = 0; i < n; ++i) {
    node_rank_[i] = int(i);
    for (int s : succ_[i]) in_order = in_order && s > int(i);
  }
  if (in_order) return;  // data edges always go forward; so do the assignment-order ones
  // Otherwise: Kahn's algorithm, smallest position first.
  std::vector<int> indegree(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (int u : users_[i]) ++indegree[size_t(u)];
    for (int s : succ_[i])
      if (std::find(users_[i].begin(), users_[i].end(), s) == users_[i].end())
        ++indegree[size_t(s)];
  }
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i)
    if (indegree[i] == 0) ready.push(int(i));
  int next = 0;
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    node_rank_[size_t(i)] = next++;
    auto release = [&](int t) {
      if (--indegree[size_t(t)] == 0) ready.push(t);
    };
    for (int u : users_[size_t(i)]) release(u);
    for (int s : succ_[size_t(i)])
      if (std::find(users_[size_t(i)].begin(), users_[size_t(i)].end(), s) ==
          users_[size_t(i)].end())
        release(s);
  }
  KILN_ASSERT(next == int(n), "fusion: the graph's data and assignment order form a cycle");
}

int FusionUnits::position(const ir::Node* n) const {
  auto it = position_.find(n);
  return it == position_.end() ? -1 : it->second;
}

int FusionUnits::find(int id) {
  while (parent_[size_t(id)] != id) id = parent_[size_t(id)] = parent_[size_t(parent_[size_t(id)])];
  return id;
}

int FusionUnits::home(int pos) {
  int h = home_[size_t(pos)];
  return h < 0 ? -1 : find(h);
}

std::vector<int> FusionUnits::groups_of(int pos) {
  std::vector<int> out;
  if (int h = home(pos); h >= 0) out.push_back(h);
  for (int c : copies_[size_t(pos)]) out.push_back(find(c));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool FusionUnits::in_group(int pos, int gid) {
  if (home(pos) == gid) return true;
  for (int c : copies_[size_t(pos)])
    if (find(c) == gid) return true;
  return false;
}

int FusionUnits::new_group(int pos) {
  KILN_ASSERT(home_[size_t(pos)] < 0, "fusion: a node's original is in one group");
  int id = int(groups_.size());
  groups_.push_back(Group{{pos}});
  parent_.push_back(id);
  group_rank_.push_back(node_rank_[size_t(pos)]);
  group_mark_.push_back(0);
  home_[size_t(pos)] = id;
  return id;
}

void FusionUnits::join(int pos, int gid) { merge_with({gid}, pos); }

int FusionUnits::merge_with(const std::vector<int>& gids, int pos) {
  KILN_ASSERT(!gids.empty() && home_[size_t(pos)] < 0 && !has_copies(pos),
              "fusion: only a lone node joins groups");
  std::vector<Unit> set{-(pos + 1)};
  for (int g : gids) set.push_back(find(g));
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  int lo = rank(set[0]), hi = lo;
  for (Unit u : set) {
    lo = std::min(lo, rank(u));
    hi = std::max(hi, rank(u));
  }
  const int into = find(gids[0]);
  // Membership first (the edges of the contracted unit), then the order.
  for (Unit u : set) {
    if (u < 0 || u == into) continue;
    Group& from = groups_[size_t(u)];
    Group& to = groups_[size_t(into)];
    for (int m : from.members) add_unique(to.members, m);
    from.members.clear();
    parent_[size_t(u)] = into;
  }
  add_unique(groups_[size_t(into)].members, pos);
  home_[size_t(pos)] = into;
  reorder(set, into, lo, hi);
  return into;
}

void FusionUnits::copy(int pos, int gid) {
  gid = find(gid);
  add_unique(groups_[size_t(gid)].members, pos);
  copies_[size_t(pos)].push_back(gid);
  // New edges out of the group: the copy's assignment-order successors, which may rank
  // below the group.
  int lo = rank(gid);
  for (int s : succ_[size_t(pos)])
    for (Unit y : units_of(s))
      if (y != gid) lo = std::min(lo, rank(y));
  if (lo < rank(gid)) reorder({gid}, gid, lo, rank(gid));
}

std::vector<FusionUnits::Unit> FusionUnits::units_of(int pos) {
  std::vector<int> gs = groups_of(pos);
  if (gs.empty()) return {-(pos + 1)};
  return gs;
}

bool FusionUnits::in_unit(int pos, Unit u) { return u < 0 ? pos == -u - 1 : in_group(pos, u); }

void FusionUnits::members_of(Unit u, std::vector<int>& out) const {
  out.clear();
  if (u < 0)
    out.push_back(-u - 1);
  else
    out = groups_[size_t(u)].members;
}

void FusionUnits::successors(Unit x, std::vector<Unit>& out) {
  std::vector<int> members;
  members_of(x, members);
  for (int m : members) {
    if (x < 0 || home(m) == x)
      for (int u : users_[size_t(m)])
        for (Unit y : units_of(u))
          if (y != x && !in_unit(m, y)) out.push_back(y);
    for (int s : succ_[size_t(m)])
      for (Unit y : units_of(s))
        if (y != x) out.push_back(y);
  }
}

void FusionUnits::predecessors(Unit y, std::vector<Unit>& out) {
  std::vector<int> members;
  members_of(y, members);
  for (int m : members) {
    for (int q : producers_[size_t(m)]) {
      if (in_unit(q, y)) continue;
      if (int h = home(q); h >= 0)
        out.push_back(h);
      else if (!has_copies(q))
        out.push_back(-(q + 1));
      // else: q lives on only as copies, none in y; y reads no value from them.
    }
    for (int r : pred_[size_t(m)])
      for (Unit x : units_of(r))
        if (x != y) out.push_back(x);
  }
}

bool FusionUnits::marked(Unit u) const {
  return (u < 0 ? node_mark_[size_t(-u - 1)] : group_mark_[size_t(u)]) == epoch_;
}

void FusionUnits::mark(Unit u) {
  (u < 0 ? node_mark_[size_t(-u - 1)] : group_mark_[size_t(u)]) = epoch_;
}

void FusionUnits::new_epoch() { ++epoch_; }

bool FusionUnits::search_forward(const std::vector<Unit>& set, int hi, std::vector<Unit>& found) {
  new_epoch();
  for (Unit u : set) mark(u);
  auto in_set = [&](Unit u) { return std::find(set.begin(), set.end(), u) != set.end(); };
  std::vector<Unit> stack;
  for (Unit u : set) successors(u, stack);
  std::erase_if(stack, in_set);  // edges between the units being contracted
  while (!stack.empty()) {
    Unit x = stack.back();
    stack.pop_back();
    if (in_set(x)) return true;
    if (marked(x) || rank(x) >= hi) continue;  // ranked above S: cannot lead back into it
    mark(x);
    found.push_back(x);
    successors(x, stack);
  }
  return false;
}

void FusionUnits::search_backward(const std::vector<Unit>& set, int lo, std::vector<Unit>& found) {
  new_epoch();
  for (Unit u : set) mark(u);
  std::vector<Unit> stack;
  for (Unit u : set) predecessors(u, stack);
  while (!stack.empty()) {
    Unit x = stack.back();
    stack.pop_back();
    if (marked(x) || rank(x) <= lo) continue;
    mark(x);
    found.push_back(x);
    predecessors(x, stack);
  }
}

bool FusionUnits::would_cycle(const std::vector<int>& gids, int pos) {
  std::vector<Unit> set{-(pos + 1)};
  for (int g : gids) set.push_back(find(g));
  int hi = rank(set[0]);
  for (Unit u : set) hi = std::max(hi, rank(u));
  std::vector<Unit> found;
  return search_forward(set, hi, found);
}

bool FusionUnits::copy_would_cycle(int gid, int pos) {
  // A path from the copy's assignment-order successors back into the group.
  gid = find(gid);
  const int hi = rank(gid);
  new_epoch();
  std::vector<Unit> stack;
  for (int s : succ_[size_t(pos)])
    for (Unit y : units_of(s)) stack.push_back(y);
  while (!stack.empty()) {
    Unit x = stack.back();
    stack.pop_back();
    if (x == gid) return true;
    if (marked(x) || rank(x) >= hi) continue;
    mark(x);
    successors(x, stack);
  }
  return false;
}

void FusionUnits::reorder(const std::vector<Unit>& set, Unit into, int lo, int hi) {
  // F: reachable from the contracted unit, ranked below hi (must follow it); B: reaching
  // it, ranked above lo (must precede it). The ranks of B, S and F are dealt out again:
  // B's lowest first, then the contracted unit, then F's at the top; relative orders within
  // B and within F are kept, so every edge leaving the window still points upwards.
  std::vector<Unit> self{into};
  std::vector<Unit> forward, backward;
  const bool cycle = search_forward(self, hi, forward);
  KILN_ASSERT(!cycle, "fusion: a merge closed a cycle between groups");
  search_backward(self, lo, backward);
  std::vector<int> pool;
  for (Unit u : set) pool.push_back(rank(u));
  for (Unit u : forward) pool.push_back(rank(u));
  for (Unit u : backward) pool.push_back(rank(u));
  std::sort(pool.begin(), pool.end());
  auto by_rank = [&](Unit a, Unit b) { return rank(a) < rank(b); };
  std::sort(forward.begin(), forward.end(), by_rank);
  std::sort(backward.begin(), backward.end(), by_rank);
  auto set_rank = [&](Unit u, int r) {
    (u < 0 ? node_rank_[size_t(-u - 1)] : group_rank_[size_t(u)]) = r;
  };
  size_t next = 0;
  for (Unit u : backward) set_rank(u, pool[next++]);
  set_rank(into, pool[next]);
  size_t top = pool.size() - forward.size();
  for (Unit u : forward) set_rank(u, pool[top++]);
}

bool FusionUnits::order_is_topological() {
  std::vector<Unit> units;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (home_[i] < 0 && copies_[i].empty()) units.push_back(-int(i) - 1);
  for (size_t g = 0; g < groups_.size(); ++g)
    if (find(int(g)) == int(g) && !groups_[g].members.empty()) units.push_back(int(g));
  std::vector<Unit> out;
  for (Unit x : units) {
    out.clear();
    successors(x, out);
    for (Unit y : out)
      if (rank(y) <= rank(x)) return false;
  }
  return true;
}

}  // namespace kiln::passes
