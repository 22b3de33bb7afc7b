#include "exchange.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <algorithm>

#include "exec_protocol.hpp"
#include "ws1/safetensors.hpp"

namespace ws1::exec {
namespace fs = std::filesystem;
namespace {

Error failure(std::string problem) { return Error{"", "", std::move(problem), ExitCode::kEnvironment}; }

std::string names_of(const std::vector<TensorDecl>& decls) {
  std::string s;
  for (const TensorDecl& d : decls) s += (s.empty() ? "" : ", ") + d.name;
  return s;
}

}  // namespace

Result<std::unique_ptr<ExchangeDir>> ExchangeDir::create() {
  const char* tmp = std::getenv("TMPDIR");
  const fs::path base = tmp != nullptr && *tmp != '\0' ? fs::path(tmp) : fs::path("/tmp");
  std::string templ = (base / "ws1check-exec-XXXXXX").string();
  if (mkdtemp(templ.data()) == nullptr)
    return failure(fmt::format("cannot create a private directory in {}: {}", base.string(),
                               std::strerror(errno)));
  std::error_code ec;
  return std::unique_ptr<ExchangeDir>(new ExchangeDir(fs::absolute(fs::path(templ), ec)));
}

ExchangeDir::~ExchangeDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

fs::path ExchangeDir::input_file(std::uint64_t request) const {
  return path_ / fmt::format("req-{}.in.safetensors", request);
}

fs::path ExchangeDir::output_file(std::uint64_t request) const {
  return path_ / fmt::format("req-{}.out.safetensors", request);
}

bool ExchangeDir::holds(const fs::path& file) const {
  const fs::path p = file.lexically_normal();
  return p.is_absolute() && p.parent_path() == path_ && p.has_filename() && p.filename() != "..";
}

RequestFiles::~RequestFiles() {
  std::error_code ec;
  for (const fs::path& f : files) fs::remove(f, ec);
}

Tensors InputCacheBook::plan(const Tensors& inputs, std::map<std::string, std::string>& cached,
                             std::map<std::string, std::string>& store, std::vector<std::string>& evict) {
  evict = std::move(unsure_);
  unsure_.clear();
  ++clock_;
  Tensors file;
  std::vector<std::string> in_use;
  for (const NamedTensor& t : inputs) {
    const std::uint64_t bytes = t.tensor.nbytes();
    if (bytes < min_bytes_ || bytes > capacity_ || !t.tensor.is_contiguous()) {
      file.push_back(t);
      continue;
    }
    const std::string key = input_cache_key(t.tensor);
    in_use.push_back(key);
    if (auto it = held_.find(key); it != held_.end()) {
      it->second.last_use = clock_;
      cached[t.name] = key;
      ++hits_;
      saved_ += bytes;
      continue;
    }
    while (used_ + bytes > capacity_) {  // the least recently used key not needed now
      auto victim = held_.end();
      for (auto it = held_.begin(); it != held_.end(); ++it)
        if (std::find(in_use.begin(), in_use.end(), it->first) == in_use.end() &&
            (victim == held_.end() || it->second.last_use < victim->second.last_use))
          victim = it;
      if (victim == held_.end()) break;
      used_ -= victim->second.bytes;
      evict.push_back(victim->first);
      held_.erase(victim);
    }
    if (used_ + bytes <= capacity_) {
      held_[key] = {bytes, clock_};
      used_ += bytes;
      store[t.name] = key;
    }
    file.push_back(t);
  }
  return file;
}

void InputCacheBook::forget(const std::map<std::string, std::string>& store) {
  for (const auto& [name, key] : store) {
    if (auto it = held_.find(key); it != held_.end()) {
      used_ -= it->second.bytes;
      held_.erase(it);
    }
    unsure_.push_back(key);
  }
}

Result<Tensors> read_outputs(const fs::path& file, const std::vector<TensorDecl>& decls,
                             const Tensors& inputs, bool gradients) {
  auto read = read_safetensors(file);
  if (!read) return failure("its output file is unusable: " + read.error().message());
  for (const NamedTensor& t : read->tensors) {
    bool declared = false;
    for (const TensorDecl& d : decls) declared = declared || d.name == t.name;
    if (!declared)
      return failure(fmt::format("it returned a tensor '{}' the op does not have (the op returns {})",
                                 t.name, names_of(decls)));
  }
  Tensors out;
  for (const TensorDecl& d : decls) {
    const Tensor* t = read->find(d.name);
    if (t == nullptr)
      return failure(fmt::format("it returned no tensor '{}' (the op returns {})", d.name, names_of(decls)));
    if (t->dtype() != d.candidate_dtype)
      return failure(fmt::format("it returned '{}' as {}; the op returns {}", d.name,
                                 dtype_safetensors_name(t->dtype()),
                                 dtype_safetensors_name(d.candidate_dtype)));
    // A gradient has the shape of what it is the gradient of.
    if (gradients && d.name.size() > 1 && d.name[0] == 'd') {
      const Tensor* x = find_tensor(inputs, std::string_view(d.name).substr(1));
      if (x != nullptr && x->shape() != t->shape())
        return failure(fmt::format("it returned '{}' with shape {}; the input {} has shape {}", d.name,
                                   shape_string(t->shape()), d.name.substr(1), shape_string(x->shape())));
    }
    out.push_back({d.name, *t});
  }
  return out;
}

}  // namespace ws1::exec
