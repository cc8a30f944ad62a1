// GgufFile: owns the read-only mapping of the model file (or borrows a caller buffer) and the
// parsed metadata; tensor data is never copied. Parsing and validation live in gguf_parse.cpp.
#include "model_loader/gguf.h"

#include <cstring>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <limits>
#include <system_error>
#include <unordered_map>

#include "model_loader/gguf_parse.h"

namespace infinipot::gguf {

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // the parser checked that this does not overflow
  return n;
}

int64_t TensorInfo::rows() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

struct GgufFile::Impl {
  std::string label;
  const uint8_t* data = nullptr;
  size_t size = 0;
  void* mapping = nullptr;  // non-null when we own an mmap of `size` bytes
  int fd = -1;              // the open file (read_tensor's checked reads); -1 for from_memory
  detail::ParsedGguf parsed;
  std::unordered_map<std::string, size_t> tensor_index;

  ~Impl() {
    if (mapping != nullptr) munmap(mapping, size);
    if (fd >= 0) ::close(fd);
  }

  [[noreturn]] void fail(const std::string& msg) const { throw GgufError(label + ": " + msg); }

  void parse() {
    parsed = detail::parse_gguf(data, size, label);
    tensor_index.reserve(parsed.tensors.size());
    for (size_t i = 0; i < parsed.tensors.size(); ++i) tensor_index.emplace(parsed.tensors[i].name, i);
  }

  // Runs a Value accessor and puts the key name in front of its error.
  template <typename F>
  auto typed(const std::string& key, F&& f) const -> decltype(f(std::declval<const Value&>())) {
    auto it = parsed.metadata.find(key);
    if (it == parsed.metadata.end()) fail(fmt::format("missing required metadata key '{}'", key));
    try {
      return f(it->second);
    } catch (const GgufError& e) {
      fail(fmt::format("metadata '{}': {}", key, e.what()));
    }
  }

  // Array elements converted one by one; the message says which element was wrong.
  template <typename T, typename F>
  std::vector<T> array_of(const std::string& key, const char* what, F&& convert) const {
    return typed(key, [&](const Value& v) {
      if (!v.is_array()) {
        throw GgufError(fmt::format("expected an ARRAY of {}, found a {}", what, value_type_name(v.type)));
      }
      std::vector<T> out;
      out.reserve(v.array.size());
      for (size_t i = 0; i < v.array.size(); ++i) {
        try {
          out.push_back(convert(v.array[i]));
        } catch (const GgufError& e) {
          throw GgufError(fmt::format("element {}: {}", i, e.what()));
        }
      }
      return out;
    });
  }
};

GgufFile::GgufFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

GgufFile GgufFile::open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->label = path;
  auto os_error = [&](const char* what) {
    return GgufError(fmt::format("{}: {}: {}", path, what, std::generic_category().message(errno)));
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw os_error("cannot open the model file");
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    GgufError e = os_error("cannot stat the model file");
    ::close(fd);
    throw e;
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    impl->fail("is a directory; expected a GGUF model file");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    impl->fail("is not a regular file; expected a GGUF model file");
  }
  if (st.st_size == 0) {
    ::close(fd);
    impl->fail("the file is empty (0 bytes); expected a GGUF model file");
  }
  if (static_cast<uint64_t>(st.st_size) > std::numeric_limits<size_t>::max()) {
    ::close(fd);
    impl->fail("the file is too large to map");
  }
  impl->size = static_cast<size_t>(st.st_size);
  // MAP_PRIVATE + PROT_READ: the weights are read straight from the page cache and the
  // runtime cannot modify the file by accident.
  void* m = mmap(nullptr, impl->size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (m == MAP_FAILED) {
    GgufError e = os_error("cannot mmap the model file");
    ::close(fd);
    throw e;
  }
  impl->fd = fd;  // kept for read_tensor: a read past a truncated end fails, a mapped one would SIGBUS
  impl->mapping = m;
  impl->data = static_cast<const uint8_t*>(m);
  impl->parse();
  return GgufFile(std::move(impl));
}

GgufFile GgufFile::from_memory(const uint8_t* data, size_t size, const std::string& label) {
  auto impl = std::make_unique<Impl>();
  impl->label = label;
  impl->data = data;
  impl->size = size;
  impl->parse();
  return GgufFile(std::move(impl));
}

void GgufFile::read_tensor(const TensorInfo& t, void* dst, uint64_t offset, uint64_t n) const {
  if (offset > t.n_bytes || n > t.n_bytes - offset)
    throw GgufError(impl_->label + ": read of " + std::to_string(n) + " bytes at " + std::to_string(offset) +
                    " is outside tensor '" + t.name + "' (" + std::to_string(t.n_bytes) + " bytes)");
  const uint64_t at = impl_->parsed.data_offset + t.offset + offset;
  if (impl_->fd < 0) {
    std::memcpy(dst, impl_->data + at, n);
    return;
  }
  auto* out = static_cast<uint8_t*>(dst);
  uint64_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(impl_->fd, out + done, n - done, static_cast<off_t>(at + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      throw GgufError(impl_->label + ": reading tensor '" + t.name + "' failed (" +
                      (r == 0 ? std::string("the file ends early") : std::string(std::strerror(errno))) +
                      "): the model file was truncated or changed while in use; restore it and open it again");
    done += static_cast<uint64_t>(r);
  }
}

void GgufFile::drop_cached(const TensorInfo& t) const {
  if (impl_->fd < 0) return;
  const uint64_t at = impl_->parsed.data_offset + t.offset;
  // Advice, never an error: a kernel that ignores it leaves the pages to the page cache's LRU.
  (void)::posix_fadvise(impl_->fd, static_cast<off_t>(at), static_cast<off_t>(t.n_bytes), POSIX_FADV_DONTNEED);
}

void GgufFile::drop_cached_data() const {
  if (impl_->fd < 0) return;
  const uint64_t at = impl_->parsed.data_offset;
  (void)::posix_fadvise(impl_->fd, static_cast<off_t>(at), static_cast<off_t>(impl_->size - at), POSIX_FADV_DONTNEED);
}

uint64_t GgufFile::cached_bytes() const {
  if (!impl_->mapping) return 0;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((impl_->size + page - 1) / page);
  if (::mincore(impl_->mapping, impl_->size, resident.data()) != 0) return 0;
  uint64_t pages = 0;
  for (unsigned char r : resident) pages += r & 1;
  return pages * page;
}

const std::string& GgufFile::path() const { return impl_->label; }
uint32_t GgufFile::version() const { return impl_->parsed.version; }
uint64_t GgufFile::alignment() const { return impl_->parsed.alignment; }
size_t GgufFile::file_size() const { return impl_->size; }
uint64_t GgufFile::data_offset() const { return impl_->parsed.data_offset; }

const std::map<std::string, Value>& GgufFile::metadata() const { return impl_->parsed.metadata; }

bool GgufFile::has(const std::string& key) const { return impl_->parsed.metadata.count(key) != 0; }

const Value& GgufFile::get(const std::string& key) const {
  auto it = impl_->parsed.metadata.find(key);
  if (it == impl_->parsed.metadata.end()) impl_->fail(fmt::format("missing required metadata key '{}'", key));
  return it->second;
}

uint64_t GgufFile::get_u64(const std::string& key) const {
  return impl_->typed(key, [](const Value& v) { return v.as_u64(); });
}

uint32_t GgufFile::get_u32(const std::string& key) const {
  return impl_->typed(key, [](const Value& v) {
    uint64_t x = v.as_u64();
    if (x > std::numeric_limits<uint32_t>::max()) {
      throw GgufError(fmt::format("value {} does not fit in uint32", x));
    }
    return static_cast<uint32_t>(x);
  });
}

float GgufFile::get_f32(const std::string& key) const {
  return impl_->typed(key, [](const Value& v) { return static_cast<float>(v.as_f64()); });
}

bool GgufFile::get_bool(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  return impl_->typed(key, [](const Value& v) { return v.as_bool(); });
}

std::string GgufFile::get_string(const std::string& key) const {
  return impl_->typed(key, [](const Value& v) { return v.as_string(); });
}

std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  return impl_->array_of<std::string>(key, "STRING", [](const Value& v) { return v.as_string(); });
}

std::vector<int64_t> GgufFile::get_int_array(const std::string& key) const {
  return impl_->array_of<int64_t>(key, "integers", [](const Value& v) { return v.as_i64(); });
}

std::vector<float> GgufFile::get_float_array(const std::string& key) const {
  return impl_->array_of<float>(key, "numbers",
                                [](const Value& v) { return static_cast<float>(v.as_f64()); });
}

const std::vector<TensorInfo>& GgufFile::tensors() const { return impl_->parsed.tensors; }

const TensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = impl_->tensor_index.find(name);
  return it == impl_->tensor_index.end() ? nullptr : &impl_->parsed.tensors[it->second];
}

const uint8_t* GgufFile::tensor_data(const TensorInfo& t) const {
  return impl_->data + impl_->parsed.data_offset + t.offset;
}

}  // namespace infinipot::gguf
