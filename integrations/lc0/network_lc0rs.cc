/*
  The lc0rs backend for Leela Chess Zero: runs lc0's search on lc0rs, a neural network backend
  written in Rust, through lc0rs' C interface (lc0rs.h).

  This file is a contribution to Leela Chess Zero and, like it, free software: you can
  redistribute it and/or modify it under the terms of the GNU General Public License as
  published by the Free Software Foundation, either version 3 of the License, or (at your
  option) any later version. It is distributed in the hope that it will be useful, but
  WITHOUT ANY WARRANTY; without even the implied warranty of MERCHANTABILITY or FITNESS FOR A
  PARTICULAR PURPOSE. See the GNU General Public License for more details
  <http://www.gnu.org/licenses/>.

  Use: lc0 --backend=lc0rs --backend-opts=backend=cpu,threads=2

  Backend options (--backend-opts):
    backend=NAME        the lc0rs backend (cpu, cuda-fp16, rocm-fp16, hip-emu, ...); absent:
                        the best one the machine runs. Inside check/mux/demux, where
                        `backend` names the lc0 backend, write lc0rs_backend=NAME instead
                        (it wins; backend=lc0rs is taken as naming this adapter).
    lc0rs_backend=NAME  the same as backend=NAME.
    weights=SPEC        the net lc0rs opens instead of lc0's --weights: a file, bundled:tiny,
                        preset:NAME (lc0rs' spelling).
    anything else       passed to lc0rs as its backend options (threads=2,max_batch=64,...);
                        lc0rs refuses what its backend does not know.

  The net: lc0 has already read and fixed up the --weights file into a pblczero::Net; it is
  serialized back to protobuf bytes and opened from memory by lc0rs_net_open_bytes, so lc0rs
  evaluates exactly the net lc0 loaded (its own loader checks and decodes it again).
*/

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "neural/backend.h"
#include "neural/backends/lc0rs/lc0rs.h"
#include "neural/encoder.h"
#include "neural/factory.h"
#include "neural/loader.h"
#include "neural/register.h"
#include "neural/shared_params.h"
#include "utils/exception.h"
#include "utils/fastmath.h"
#include "utils/logging.h"

namespace lczero {
namespace {

// Throws lc0's Exception for a failed lc0rs call, with lc0rs' own message.
void Check(lc0rs_status status, const char* what) {
  if (status == LC0RS_STATUS_OK) return;
  // The message is the calling thread's, valid until its next lc0rs call: copied at once.
  const std::string message = lc0rs_last_error();
  throw Exception(std::string("lc0rs: ") + what + " failed (" +
                  lc0rs_status_name(status) + "): " + message);
}

// The keys an OptionsDict holds itself (not its parents') with values of type T. OptionsDict
// offers no listing, and its per-type tables are a private base; this names the protected
// accessor through a derived class and applies it to the dict's base (a C-style cast may
// convert to an inaccessible base). Used only to pass unknown options on to lc0rs.
template <typename T>
struct OwnKeys : TypeDict<T> {
  static std::vector<std::string> Of(const OptionsDict& dict) {
    const auto accessor = &OwnKeys::dict;
    const TypeDict<T>& table = (const TypeDict<T>&)dict;
    std::vector<std::string> keys;
    for (const auto& entry : (table.*accessor)()) keys.push_back(entry.first);
    return keys;
  }
};

std::string FloatText(float value) {
  std::ostringstream text;
  text.precision(9);
  text << value;
  return text.str();
}

// What --backend-opts asked of this adapter.
struct Lc0rsOptions {
  std::optional<std::string> backend;
  std::optional<std::string> weights;
  std::string passthrough;  // lc0rs' backend options, "key=value,..."
};

Lc0rsOptions ReadOptions(const OptionsDict& options) {
  if (!options.ListSubdicts().empty()) {
    throw Exception("lc0rs: nested option groups in --backend-opts are not supported");
  }
  Lc0rsOptions result;
  std::vector<std::pair<std::string, std::string>> rest;
  std::optional<std::string> backend, lc0rs_backend;
  for (const auto& key : OwnKeys<std::string>::Of(options)) {
    const auto value = options.Get<std::string>(key);  // Marks it as read.
    if (key == "backend") {
      if (value != "lc0rs") backend = value;
    } else if (key == "lc0rs_backend") {
      lc0rs_backend = value;
    } else if (key == "weights") {
      result.weights = value;
    } else {
      rest.emplace_back(key, value);
    }
  }
  for (const auto& key : OwnKeys<int>::Of(options)) {
    rest.emplace_back(key, std::to_string(options.Get<int>(key)));
  }
  for (const auto& key : OwnKeys<float>::Of(options)) {
    rest.emplace_back(key, FloatText(options.Get<float>(key)));
  }
  for (const auto& key : OwnKeys<bool>::Of(options)) {
    rest.emplace_back(key, options.Get<bool>(key) ? "true" : "false");
  }
  result.backend = lc0rs_backend ? lc0rs_backend : backend;
  for (const auto& [key, value] : rest) {
    if (value.find_first_of(",=()") != std::string::npos) {
      throw Exception("lc0rs: option " + key + "=" + value +
                      ": lc0rs' option values cannot contain , = ( or )");
    }
    if (!result.passthrough.empty()) result.passthrough += ",";
    result.passthrough += key + "=" + value;
  }
  return result;
}

class Lc0rsComputation : public NetworkComputation {
 public:
  explicit Lc0rsComputation(lc0rs_net net) {
    Check(lc0rs_computation_create(net, &computation_), "lc0rs_computation_create");
  }
  ~Lc0rsComputation() override {
    if (computation_ != 0) lc0rs_computation_free(computation_);
  }
  Lc0rsComputation(const Lc0rsComputation&) = delete;
  Lc0rsComputation& operator=(const Lc0rsComputation&) = delete;

  void AddInput(InputPlanes&& input) override {
    if (input.size() != LC0RS_INPUT_PLANES) {
      throw Exception("lc0rs: a position of " + std::to_string(input.size()) +
                      " input planes, " + std::to_string(LC0RS_INPUT_PLANES) +
                      " expected");
    }
    uint64_t masks[LC0RS_INPUT_PLANES];
    float values[LC0RS_INPUT_PLANES];
    for (size_t i = 0; i < LC0RS_INPUT_PLANES; ++i) {
      masks[i] = input[i].mask;
      values[i] = input[i].value;
    }
    Check(lc0rs_computation_add_planes(computation_, masks, values),
          "lc0rs_computation_add_planes");
    ++batch_size_;
  }

  // Evaluates the batch (lc0rs splits it into passes of its max_batch) and copies every
  // output out, so that the getters are plain reads.
  void ComputeBlocking() override {
    Check(lc0rs_computation_compute(computation_), "lc0rs_computation_compute");
    q_.resize(batch_size_);
    d_.resize(batch_size_);
    m_.resize(batch_size_);
    policy_.resize(static_cast<size_t>(batch_size_) * LC0RS_POLICY_SIZE);
    for (int i = 0; i < batch_size_; ++i) {
      Check(lc0rs_computation_get_q(computation_, i, &q_[i]), "lc0rs_computation_get_q");
      Check(lc0rs_computation_get_d(computation_, i, &d_[i]), "lc0rs_computation_get_d");
      Check(lc0rs_computation_get_m(computation_, i, &m_[i]), "lc0rs_computation_get_m");
      Check(lc0rs_computation_get_policy_logits(computation_, i,
                                                &policy_[i * LC0RS_POLICY_SIZE],
                                                LC0RS_POLICY_SIZE),
            "lc0rs_computation_get_policy_logits");
    }
  }

  int GetBatchSize() const override { return batch_size_; }
  // W − L for the side to move (the tanh value for a net without a WDL head).
  float GetQVal(int sample) const override { return q_.at(sample); }
  float GetDVal(int sample) const override { return d_.at(sample); }
  float GetMVal(int sample) const override { return m_.at(sample); }
  // The raw logit: lc0 applies the softmax (and its temperature) itself.
  float GetPVal(int sample, int move_id) const override {
    return policy_.at(static_cast<size_t>(sample) * LC0RS_POLICY_SIZE + move_id);
  }

 private:
  lc0rs_computation computation_ = 0;
  int batch_size_ = 0;
  std::vector<float> q_, d_, m_, policy_;
};

class Lc0rsNetwork : public Network {
 public:
  Lc0rsNetwork(const std::optional<WeightsFile>& weights, const OptionsDict& dict) {
    if (lc0rs_abi_version() != LC0RS_ABI_VERSION) {
      throw Exception("lc0rs: the library implements C interface version " +
                      std::to_string(lc0rs_abi_version()) + ", this lc0 was built for " +
                      std::to_string(LC0RS_ABI_VERSION));
    }
    const Lc0rsOptions options = ReadOptions(dict);
    const char* backend = options.backend ? options.backend->c_str() : nullptr;
    std::string source;
    if (options.weights) {
      source = *options.weights;
      Check(lc0rs_net_open(source.c_str(), backend, options.passthrough.c_str(), &net_),
            "lc0rs_net_open");
    } else if (weights) {
      source = "lc0's weights (in memory)";
      const std::string bytes = weights->OutputAsString();
      Check(lc0rs_net_open_bytes(reinterpret_cast<const uint8_t*>(bytes.data()),
                                 bytes.size(), source.c_str(), backend,
                                 options.passthrough.c_str(), &net_),
            "lc0rs_net_open_bytes");
    } else {
      throw Exception(
          "The lc0rs backend requires a network file (--weights) or "
          "weights= in --backend-opts.");
    }
    try {
      Describe(options, backend, source);
    } catch (...) {
      // The destructor does not run for a constructor that throws.
      lc0rs_net_free(net_);
      net_ = 0;
      throw;
    }
  }
  ~Lc0rsNetwork() override {
    if (net_ != 0) lc0rs_net_free(net_);
  }
  Lc0rsNetwork(const Lc0rsNetwork&) = delete;
  Lc0rsNetwork& operator=(const Lc0rsNetwork&) = delete;

  lc0rs_net net() const { return net_; }

  const NetworkCapabilities& GetCapabilities() const override { return capabilities_; }
  // One lc0rs computation per lc0 computation: each serves the one search thread that owns
  // it; computations of one net may compute on several threads at once.
  std::unique_ptr<NetworkComputation> NewComputation() override {
    return std::make_unique<Lc0rsComputation>(net_);
  }
  // lc0rs' cpu backend spreads one batch over its own threads (threads=): one search thread
  // keeps it busy; a GPU backend gains from a second thread filling the next batch.
  int GetThreads() const override { return is_cpu_ ? 1 : 2; }
  bool IsCpu() const override { return is_cpu_; }
  int GetMiniBatchSize() const override {
    return info_.recommended_batch > 0 ? static_cast<int>(info_.recommended_batch) : 1;
  }

 private:
  // Reads the net's capabilities, prepares its batch sizes and says what was opened.
  void Describe(const Lc0rsOptions& options, const char* backend, const std::string& source) {
    Check(lc0rs_net_get_info(net_, &info_), "lc0rs_net_get_info");
    capabilities_ = NetworkCapabilities{
        static_cast<pblczero::NetworkFormat::InputFormat>(info_.input_format),
        info_.has_wdl ? pblczero::NetworkFormat::OUTPUT_WDL
                      : pblczero::NetworkFormat::OUTPUT_CLASSICAL,
        info_.has_moves_left ? pblczero::NetworkFormat::MOVES_LEFT_V1
                             : pblczero::NetworkFormat::MOVES_LEFT_NONE};
    const std::string name = backend ? backend : "";
    is_cpu_ = name == "cpu" || name == "hip-emu";
    // Every batch size up to the minibatch lc0 is told to gather, from as many search threads
    // as lc0 then runs by default (GetThreads(), and one more where the backend is not a
    // CPU's), is prepared now (a GPU backend's graph capture and GEMM choice), as lc0rs' own
    // engine does before its first search: else the first search pays for it.
    const int threads = Lc0rsNetwork::GetThreads() + (is_cpu_ ? 0 : 1);
    Check(lc0rs_net_prepare(net_, static_cast<size_t>(Lc0rsNetwork::GetMiniBatchSize()),
                            static_cast<size_t>(threads)),
          "lc0rs_net_prepare");
    CERR << "lc0rs " << lc0rs_version() << ": net " << source << " on backend "
         << (backend ? backend : "(the best available)") << " with options \""
         << options.passthrough << "\"; input format " << info_.input_format
         << (info_.has_wdl ? ", WDL" : "") << (info_.has_moves_left ? ", moves left" : "")
         << ", max batch " << info_.max_batch << ", recommended batch "
         << info_.recommended_batch << ".";
  }

  lc0rs_net net_ = 0;
  lc0rs_net_info info_{};
  NetworkCapabilities capabilities_{};
  bool is_cpu_ = false;
};

std::unique_ptr<Network> MakeLc0rsNetwork(const std::optional<WeightsFile>& weights,
                                          const OptionsDict& options) {
  return std::make_unique<Lc0rsNetwork>(weights, options);
}

class Lc0rsBackend;

// What one batch needs on the host: an lc0rs computation and the arrays passed to it. lc0 makes
// a new computation for every batch (its backendbench too); made afresh each time, these
// (about 3 MB for a Maia batch of 1024, on both sides of the C interface) cost their page
// faults again every batch. The backend keeps the ones its computations leave (cleared, with
// their capacity) for the next.
struct BatchBuffers {
  BatchBuffers() = default;
  BatchBuffers(const BatchBuffers&) = delete;
  BatchBuffers& operator=(const BatchBuffers&) = delete;
  ~BatchBuffers() {
    if (computation != 0) lc0rs_computation_free(computation);
  }
  void Clear() {
    results.clear();
    planes.clear();
    counts.clear();
    indices.clear();
  }

  lc0rs_computation computation = 0;
  std::vector<EvalResultPtr> results;     // Where each position's outputs go.
  std::vector<lc0rs_input_plane> planes;  // 112 a position, as lc0's encoder wrote them.
  std::vector<uint32_t> counts;           // Of each position's policy indices,
  std::vector<uint16_t> indices;          // the legal moves', where the policy is asked for.
  std::vector<float> q, d, m, logits;    // The outputs.
};

// lc0's planes are copied into lc0rs' as they are, and lc0rs reads those in place.
static_assert(sizeof(InputPlane) == sizeof(lc0rs_input_plane) &&
              offsetof(InputPlane, mask) == offsetof(lc0rs_input_plane, mask) &&
              offsetof(InputPlane, value) == offsetof(lc0rs_input_plane, value) &&
              std::is_trivially_copyable_v<InputPlane>);

// One batch through lc0's Backend interface: AddInput encodes a position (on whichever search
// task calls it, several at once) and appends its planes and its legal moves' policy indices;
// ComputeBlocking hands the whole batch to lc0rs in one call, which reads back only those
// logits, and applies lc0's softmax to them. Through the Network interface every position's
// 1858 logits were copied out, position by position.
class Lc0rsBackendComputation : public BackendComputation {
 public:
  explicit Lc0rsBackendComputation(Lc0rsBackend& backend);
  ~Lc0rsBackendComputation() override;
  Lc0rsBackendComputation(const Lc0rsBackendComputation&) = delete;
  Lc0rsBackendComputation& operator=(const Lc0rsBackendComputation&) = delete;

  size_t UsedBatchSize() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return buffers_->results.size();
  }
  AddInputResult AddInput(const EvalPosition& pos, EvalResultPtr result) override;
  void ComputeBlocking() override;

 private:
  Lc0rsBackend& backend_;
  std::unique_ptr<BatchBuffers> buffers_;
  mutable std::mutex mutex_;
};

class Lc0rsBackend : public Backend {
 public:
  Lc0rsBackend(std::unique_ptr<Lc0rsNetwork> network, const OptionsDict& options)
      : network_(std::move(network)),
        backend_opts_(options.Get<std::string>(SharedBackendParams::kBackendOptionsId)),
        weights_path_(options.Get<std::string>(SharedBackendParams::kWeightsId)) {
    UpdateConfiguration(options);
    const NetworkCapabilities& caps = network_->GetCapabilities();
    input_format_ = caps.input_format;
    attributes_.has_mlh = caps.has_mlh();
    attributes_.has_wdl = caps.has_wdl();
    attributes_.runs_on_cpu = network_->IsCpu();
    attributes_.suggested_num_search_threads = network_->GetThreads();
    attributes_.recommended_batch_size = network_->GetMiniBatchSize();
    // As lc0's Network wrapper: a larger batch is evaluated by lc0rs in several passes.
    attributes_.maximum_batch_size = 1024;
  }

  BackendAttributes GetAttributes() const override { return attributes_; }
  std::unique_ptr<BackendComputation> CreateComputation() override {
    return std::make_unique<Lc0rsBackendComputation>(*this);
  }
  // lc0's rules for its own backends: another net or other backend options need a new
  // backend; the policy temperature and the history fill are taken as they change.
  UpdateConfigurationResult UpdateConfiguration(const OptionsDict& options) override {
    Backend::UpdateConfiguration(options);
    if (backend_opts_ != options.Get<std::string>(SharedBackendParams::kBackendOptionsId) ||
        weights_path_ != options.Get<std::string>(SharedBackendParams::kWeightsId)) {
      return NEED_RESTART;
    }
    inverse_temperature_ = 1.0f / options.Get<float>(SharedBackendParams::kPolicySoftmaxTemp);
    const std::string fill = options.Get<std::string>(SharedBackendParams::kHistoryFill);
    fill_ = fill == "fen_only" ? FillEmptyHistory::FEN_ONLY
            : fill == "always" ? FillEmptyHistory::ALWAYS
                               : FillEmptyHistory::NO;
    return UPDATE_OK;
  }

  lc0rs_net net() const { return network_->net(); }
  pblczero::NetworkFormat::InputFormat input_format() const { return input_format_; }
  FillEmptyHistory fill() const { return fill_; }
  float inverse_temperature() const { return inverse_temperature_; }

  // A computation's buffers: one its predecessors left, else new ones.
  std::unique_ptr<BatchBuffers> TakeBuffers() {
    {
      std::lock_guard<std::mutex> lock(spare_mutex_);
      if (!spare_.empty()) {
        std::unique_ptr<BatchBuffers> buffers = std::move(spare_.back());
        spare_.pop_back();
        return buffers;
      }
    }
    auto buffers = std::make_unique<BatchBuffers>();
    Check(lc0rs_computation_create(net(), &buffers->computation), "lc0rs_computation_create");
    return buffers;
  }
  // Keeps a finished computation's buffers for the next, as many as there were computations at
  // once (lc0's search threads), up to kMaxSpareBuffers; frees the rest.
  void ReturnBuffers(std::unique_ptr<BatchBuffers> buffers) {
    buffers->Clear();
    std::lock_guard<std::mutex> lock(spare_mutex_);
    if (spare_.size() < kMaxSpareBuffers) spare_.push_back(std::move(buffers));
  }

 private:
  static constexpr size_t kMaxSpareBuffers = 16;

  std::unique_ptr<Lc0rsNetwork> network_;
  const std::string backend_opts_;
  const std::string weights_path_;
  BackendAttributes attributes_{};
  pblczero::NetworkFormat::InputFormat input_format_{};
  float inverse_temperature_ = 1.0f;
  FillEmptyHistory fill_ = FillEmptyHistory::FEN_ONLY;
  std::mutex spare_mutex_;
  std::vector<std::unique_ptr<BatchBuffers>> spare_;
};

Lc0rsBackendComputation::Lc0rsBackendComputation(Lc0rsBackend& backend)
    : backend_(backend), buffers_(backend.TakeBuffers()) {}

Lc0rsBackendComputation::~Lc0rsBackendComputation() {
  backend_.ReturnBuffers(std::move(buffers_));
}

BackendComputation::AddInputResult Lc0rsBackendComputation::AddInput(const EvalPosition& pos,
                                                                     EvalResultPtr result) {
  int transform = 0;
  const InputPlanes planes =
      EncodePositionForNN(backend_.input_format(), pos.pos, 8, backend_.fill(), &transform);
  if (planes.size() != LC0RS_INPUT_PLANES) {
    throw Exception("lc0rs: a position of " + std::to_string(planes.size()) +
                    " input planes, " + std::to_string(LC0RS_INPUT_PLANES) + " expected");
  }
  if (!result.p.empty() && result.p.size() != pos.legal_moves.size()) {
    throw Exception("lc0rs: room for " + std::to_string(result.p.size()) +
                    " policy entries, " + std::to_string(pos.legal_moves.size()) +
                    " legal moves");
  }
  const size_t moves = result.p.empty() ? 0 : pos.legal_moves.size();
  std::lock_guard<std::mutex> lock(mutex_);
  BatchBuffers& b = *buffers_;
  b.results.push_back(result);
  b.counts.push_back(static_cast<uint32_t>(moves));
  const size_t base = b.planes.size();
  b.planes.resize(base + LC0RS_INPUT_PLANES);
  std::memcpy(b.planes.data() + base, planes.data(),
              sizeof(lc0rs_input_plane) * LC0RS_INPUT_PLANES);
  const size_t first = b.indices.size();
  b.indices.resize(first + moves);
  for (size_t k = 0; k < moves; ++k) {
    b.indices[first + k] = MoveToNNIndex(pos.legal_moves[k], transform);
  }
  return ENQUEUED_FOR_EVAL;
}

void Lc0rsBackendComputation::ComputeBlocking() {
  BatchBuffers& b = *buffers_;
  const size_t n = b.results.size();
  if (n == 0) return;
  Check(lc0rs_computation_clear(b.computation), "lc0rs_computation_clear");
  Check(lc0rs_computation_compute_planes(b.computation, n, b.planes.data(), b.counts.data(),
                                         b.indices.data()),
        "lc0rs_computation_compute_planes");
  b.q.resize(n);
  b.d.resize(n);
  b.m.resize(n);
  b.logits.resize(b.indices.size());
  Check(lc0rs_computation_get_picked_outputs(b.computation, n, b.q.data(), b.d.data(),
                                             b.m.data(), b.logits.data(), b.logits.size()),
        "lc0rs_computation_get_picked_outputs");
  const float inverse_temperature = backend_.inverse_temperature();
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    const EvalResultPtr& result = b.results[i];
    if (result.q) *result.q = b.q[i];
    if (result.d) *result.d = b.d[i];
    if (result.m) *result.m = b.m[i];
    // lc0's softmax (its Network wrapper's): the largest logit subtracted, FastExp, scaled to
    // sum to one.
    const std::span<float> policy = result.p;
    const float* own = b.logits.data() + at;
    at += policy.size();
    const float max_logit = std::accumulate(own, own + policy.size(),
                                            -std::numeric_limits<float>::infinity(),
                                            [](float a, float b) { return std::max(a, b); });
    float total = 0.0f;
    for (size_t k = 0; k < policy.size(); ++k) {
      total += policy[k] = FastExp((own[k] - max_logit) * inverse_temperature);
    }
    const float scale = total > 0.0f ? 1.0f / total : 1.0f;
    for (float& p : policy) p *= scale;
  }
}

class Lc0rsBackendFactory : public BackendFactory {
 public:
  int GetPriority() const override { return -100; }
  std::string_view GetName() const override { return "lc0rs"; }
  // As lc0's Network wrapper makes a backend of a Network: the backend options read as a
  // dictionary, the weights loaded by lc0, every option checked as read.
  std::unique_ptr<Backend> Create(const OptionsDict& options) override {
    OptionsDict network_options;
    network_options.AddSubdictFromString(
        options.Get<std::string>(SharedBackendParams::kBackendOptionsId));
    std::optional<WeightsFile> weights =
        LoadWeights(options.Get<std::string>(SharedBackendParams::kWeightsId));
    auto network = std::make_unique<Lc0rsNetwork>(weights, network_options);
    network_options.CheckAllOptionsRead("lc0rs");
    return std::make_unique<Lc0rsBackend>(std::move(network), options);
  }
};

// The Backend for lc0's search and tools; the Network for the backends made of Networks
// (check, demux, roundrobin, multiplexing, recordreplay), which find theirs by this name.
[[maybe_unused]] NetworkFactory::Register register_network("lc0rs", MakeLc0rsNetwork, -100);
[[maybe_unused]] BackendManager::Register register_backend(
    std::make_unique<Lc0rsBackendFactory>());

}  // namespace
}  // namespace lczero
