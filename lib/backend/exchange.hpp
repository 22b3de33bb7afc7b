// Internal: how tensors cross between ws1check and an exec worker. Each request's inputs are
// written as a safetensors file in a private directory (mkdtemp: mode 0700, removed with all it
// holds when the backend ends); the worker writes its outputs as another safetensors file there,
// which ws1check reads, checks against what the op returns, and removes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ws1/error.hpp"
#include "ws1/op.hpp"

namespace ws1::exec {

class ExchangeDir {
 public:
  // A new directory under $TMPDIR (else /tmp): "ws1check-exec-XXXXXX".
  static Result<std::unique_ptr<ExchangeDir>> create();
  ~ExchangeDir();
  ExchangeDir(const ExchangeDir&) = delete;
  ExchangeDir& operator=(const ExchangeDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path input_file(std::uint64_t request) const;   // req-<id>.in.safetensors
  std::filesystem::path output_file(std::uint64_t request) const;  // req-<id>.out.safetensors
  // Whether `file` names an entry directly inside the directory (no "..", no other place).
  bool holds(const std::filesystem::path& file) const;

 private:
  explicit ExchangeDir(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

// Removes the files of one request when it ends, whatever happened.
struct RequestFiles {
  std::vector<std::filesystem::path> files;
  ~RequestFiles();
};

// ws1check's record of what a worker keeps in its input cache (the worker announced its
// capacity): least recently used keys go first when a new tensor needs room; a tensor larger
// than the whole capacity always travels in the file.
class InputCacheBook {
 public:
  InputCacheBook(std::uint64_t capacity, std::uint64_t min_bytes) : capacity_(capacity), min_bytes_(min_bytes) {}
  // Which of `inputs` travel in the file (returned) and which the request names as cached or to
  // store; keys evicted to make room, and those forgotten after a failed request, go in `evict`.
  Tensors plan(const Tensors& inputs, std::map<std::string, std::string>& cached,
               std::map<std::string, std::string>& store, std::vector<std::string>& evict);
  // The request failed: the worker may or may not hold what it was asked to store.
  void forget(const std::map<std::string, std::string>& store);
  std::uint64_t held_bytes() const { return used_; }
  std::uint64_t hits() const { return hits_; }              // inputs named by key instead of sent
  std::uint64_t bytes_not_sent() const { return saved_; }

 private:
  struct Entry {
    std::uint64_t bytes = 0;
    std::uint64_t last_use = 0;
  };
  std::uint64_t capacity_, min_bytes_, used_ = 0, clock_ = 0, hits_ = 0, saved_ = 0;
  std::map<std::string, Entry> held_;
  std::vector<std::string> unsure_;  // to evict with the next request
};

// The worker's outputs, checked against the op: exactly the tensors `decls` names (no more, no
// fewer), each in its declared dtype, and (for `gradients`) d<x> in the shape of the input x.
// Returned in the order of `decls`. Errors carry only a `problem`.
Result<Tensors> read_outputs(const std::filesystem::path& file, const std::vector<TensorDecl>& decls,
                             const Tensors& inputs, bool gradients);

}  // namespace ws1::exec
