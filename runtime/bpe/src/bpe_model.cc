//===- bpe_model.cc - byte-level BPE merges --------------------------------===//

#include "bpe_model.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <tuple>

#include "absl/strings/str_format.h"
#include "unicode.h"

namespace bt::bpe::internal {
namespace {

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
         static_cast<uint32_t>(right);
}

} // namespace

const std::array<char32_t, 256> &ByteLevelChars() {
  static const std::array<char32_t, 256> chars = [] {
    // Printable Latin-1 bytes stand for themselves; the others (controls,
    // space, 7F..A0, AD) get U+0100 + n in byte order.
    std::array<char32_t, 256> c{};
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) ||
                             (b >= 0xAE && b <= 0xFF);
      c[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
    }
    return c;
  }();
  return chars;
}

std::optional<std::string> ByteLevelToBytes(absl::string_view token) {
  static const auto *inverse = [] {
    auto *m = new absl::flat_hash_map<char32_t, uint8_t>();
    for (int b = 0; b < 256; ++b)
      (*m)[ByteLevelChars()[b]] = static_cast<uint8_t>(b);
    return m;
  }();
  std::string out;
  out.reserve(token.size());
  for (size_t i = 0; i < token.size();) {
    size_t subpart;
    if (Utf8SequenceAt(token, i, &subpart) == 0)
      return std::nullopt;
    size_t len;
    const char32_t c = DecodeUtf8(token, i, &len);
    auto it = inverse->find(c);
    if (it == inverse->end())
      return std::nullopt;
    out += static_cast<char>(it->second);
    i += len;
  }
  return out;
}

BpeModel::BpeModel(const absl::flat_hash_map<std::string, int32_t> &vocab,
                   const std::vector<MergeIds> &merges, const Options &options)
    : options_(options) {
  const auto &chars = ByteLevelChars();
  for (int b = 0; b < 256; ++b) {
    std::string c;
    AppendUtf8(c, chars[b]);
    auto it = vocab.find(c);
    byte_id_[b] = it == vocab.end() ? -1 : it->second;
    if (byte_id_[b] < 0 && options.byte_fallback) {
      // Rust: format!("<{b:#04X}>") for each UTF-8 byte of the character.
      std::vector<int32_t> ids;
      for (char u : c) {
        auto f = vocab.find(absl::StrFormat("<0x%02X>", static_cast<uint8_t>(u)));
        if (f == vocab.end()) {
          ids.clear();
          break;
        }
        ids.push_back(f->second);
      }
      byte_fallback_[b] = std::move(ids);
    }
  }
  merges_.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r)
    merges_.insert_or_assign(PairKey(merges[r].left, merges[r].right),
                             MergeInfo{static_cast<int32_t>(r), merges[r].merged});
  if (options.ignore_merges) {
    for (const auto &[token, id] : vocab)
      if (std::optional<std::string> bytes = ByteLevelToBytes(token))
        whole_.emplace(std::move(*bytes), id);
  }
}

bool BpeModel::CanEncodeByte(uint8_t b) const {
  return byte_id_[b] >= 0 || !byte_fallback_[b].empty() || options_.unk_id.has_value();
}

void BpeModel::Encode(absl::string_view piece, std::vector<int32_t> &out) const {
  if (options_.ignore_merges) {
    auto it = whole_.find(piece);
    if (it != whole_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = piece.size() <= kMaxCachedLength;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(piece);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  Merge(piece, out);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheCapacity)
      cache_.clear();
    cache_.emplace(piece, std::vector<int32_t>(out.begin() + first, out.end()));
  }
}

void BpeModel::Merge(absl::string_view piece, std::vector<int32_t> &out) const {
  // The initial symbols (Rust merge_word): one per byte-level character, or
  // its <0xHH> byte-fallback tokens, or unk (consecutive ones fused with
  // fuse_unk).
  struct Symbol {
    int32_t id;
    int32_t prev, next; // -1: none
    bool alive;
  };
  std::vector<Symbol> sym;
  sym.reserve(piece.size());
  auto add = [&](int32_t id) {
    const int32_t n = static_cast<int32_t>(sym.size());
    sym.push_back({id, n - 1, -1, true});
    if (n > 0)
      sym[n - 1].next = n;
  };
  bool pending_unk = false;
  for (char ch : piece) {
    const uint8_t b = static_cast<uint8_t>(ch);
    const bool known = byte_id_[b] >= 0 || !byte_fallback_[b].empty();
    if (known && pending_unk) {
      add(*options_.unk_id);
      pending_unk = false;
    }
    if (byte_id_[b] >= 0) {
      add(byte_id_[b]);
    } else if (!byte_fallback_[b].empty()) {
      for (int32_t id : byte_fallback_[b])
        add(id);
    } else if (options_.unk_id) {
      if (pending_unk && !options_.fuse_unk)
        add(*options_.unk_id);
      pending_unk = true;
    }
    // else: unreachable, the constructor's caller checks CanEncodeByte for
    // every byte that valid UTF-8 contains.
  }
  if (pending_unk)
    add(*options_.unk_id);

  // Rust word.rs merge_all: a min-heap of (rank, position) over adjacent
  // pairs; stale entries (the pair changed) are skipped.
  using Entry = std::tuple<int32_t, int32_t, int32_t>; // rank, pos, new_id
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  auto push_pair = [&](int32_t pos) {
    const int32_t next = sym[pos].next;
    if (next < 0)
      return;
    auto it = merges_.find(PairKey(sym[pos].id, sym[next].id));
    if (it != merges_.end())
      heap.emplace(it->second.rank, pos, it->second.new_id);
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i)
    push_pair(i);
  while (!heap.empty()) {
    const auto [rank, pos, new_id] = heap.top();
    heap.pop();
    Symbol &left = sym[pos];
    if (!left.alive || left.next < 0)
      continue;
    Symbol &right = sym[left.next];
    auto it = merges_.find(PairKey(left.id, right.id));
    if (it == merges_.end() || it->second.new_id != new_id)
      continue; // stale
    left.id = new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0)
      sym[right.next].prev = pos;
    if (left.prev >= 0)
      push_pair(left.prev);
    push_pair(pos);
  }
  for (const Symbol &s : sym)
    if (s.alive)
      out.push_back(s.id);
}

} // namespace bt::bpe::internal
