#include "comm/mpi_communicator.h"

// The C API only: without these, mpi.h from C++ pulls in the deprecated C++ bindings, which
// live in a library (libmpi_cxx) densa does not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace densa {
namespace {

using Clock = std::chrono::steady_clock;

// Finalises MPI at normal exit (after main returns), when this process initialised it.
struct MpiSession {
  ~MpiSession() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
};

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, bool owned, int timeout_ms) : comm_(comm), owned_(owned), timeout_ms_(timeout_ms) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }
  ~MpiCommunicator() override {
    if (owned_) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int world_rank() const override { return world_rank_; }

  using Communicator::all_gather;
  double busy_seconds() const override { return busy_s_; }

  void set_all_reduce_algorithm(AllReduceAlgorithm algorithm) override { algorithm_ = algorithm; }

  void all_reduce_sum(float* data, int64_t n) override {
    if (size_ == 1 || n == 0) return;
    const Busy busy(this);
    if (n > INT_MAX) abort_group("all_reduce_sum of " + std::to_string(n) + " floats: more than MPI's int count");
    const bool scatter = algorithm_ == AllReduceAlgorithm::kReduceScatter ||
                         (algorithm_ == AllReduceAlgorithm::kAuto && (size_ > 2 || n > kGatherMaxFloats));
    if (scatter) return reduce_scatter_gather(data, static_cast<int>(n));
    gathered_.resize(static_cast<size_t>(n) * static_cast<size_t>(size_));
    MPI_Request req;
    check(MPI_Iallgather(data, static_cast<int>(n), MPI_FLOAT, gathered_.data(), static_cast<int>(n), MPI_FLOAT,
                         comm_, &req),
          "all_reduce_sum (MPI_Iallgather)");
    wait(&req, "all_reduce_sum", false);
    add_in_rank_order(data, n);
  }

  // out[0, n) = the sum of gathered_'s size_ parts of n floats (part r from rank r), added in
  // rank order whatever this rank is: the same additions in the same order on every rank.
  void add_in_rank_order(float* out, int64_t n) const {
    std::memcpy(out, gathered_.data(), static_cast<size_t>(n) * sizeof(float));
    for (int r = 1; r < size_; ++r) {
      const float* g = gathered_.data() + static_cast<size_t>(r) * static_cast<size_t>(n);
      for (int64_t i = 0; i < n; ++i) out[i] += g[i];
    }
  }

  // kReduceScatter: rank r owns elements [first(r), first(r + 1)); every rank sends each owner
  // its slice (all-to-all), the owner adds the N partials in rank order, then every rank
  // gathers the owners' sums. Each element gets the same additions as in the gather form.
  void reduce_scatter_gather(float* data, int n) {
    auto first = [&](int r) { return static_cast<int>(static_cast<int64_t>(n) * r / size_); };
    const int mine = first(rank_ + 1) - first(rank_);
    counts_.resize(static_cast<size_t>(size_));
    displs_.resize(static_cast<size_t>(size_));
    mine_counts_.assign(static_cast<size_t>(size_), mine);
    mine_displs_.resize(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      counts_[static_cast<size_t>(r)] = first(r + 1) - first(r);
      displs_[static_cast<size_t>(r)] = first(r);
      mine_displs_[static_cast<size_t>(r)] = r * mine;
    }
    gathered_.resize(static_cast<size_t>(mine) * static_cast<size_t>(size_));
    MPI_Request req;
    check(MPI_Ialltoallv(data, counts_.data(), displs_.data(), MPI_FLOAT, gathered_.data(), mine_counts_.data(),
                         mine_displs_.data(), MPI_FLOAT, comm_, &req),
          "all_reduce_sum (MPI_Ialltoallv)");
    wait(&req, "all_reduce_sum (scatter)", false);
    add_in_rank_order(data + first(rank_), mine);
    check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, data, counts_.data(), displs_.data(), MPI_FLOAT, comm_, &req),
          "all_reduce_sum (MPI_Iallgatherv)");
    wait(&req, "all_reduce_sum (gather)", false);
  }

  void broadcast(std::vector<uint8_t>* bytes, int root, bool wait_forever) override {
    if (size_ == 1) return;
    int64_t count = rank_ == root ? static_cast<int64_t>(bytes->size()) : 0;
    MPI_Request req;
    check(MPI_Ibcast(&count, 1, MPI_INT64_T, root, comm_, &req), "broadcast (size)");
    wait(&req, "broadcast (size)", wait_forever);
    const Busy busy(this);  // from the size on: a follower's idle wait is not communication
    if (count < 0 || count > INT_MAX) abort_group("broadcast of " + std::to_string(count) + " bytes");
    if (rank_ != root) bytes->resize(static_cast<size_t>(count));
    if (count == 0) return;
    check(MPI_Ibcast(bytes->data(), static_cast<int>(count), MPI_BYTE, root, comm_, &req), "broadcast (bytes)");
    wait(&req, "broadcast (bytes)", false);
  }

  std::vector<int64_t> all_gather(const std::vector<int64_t>& values) override {
    const Busy busy(this);
    if (values.size() > static_cast<size_t>(INT_MAX)) abort_group("all_gather of more than MPI's int count");
    std::vector<int64_t> out(values.size() * static_cast<size_t>(size_));
    if (values.empty()) return out;
    MPI_Request req;
    check(MPI_Iallgather(values.data(), static_cast<int>(values.size()), MPI_INT64_T, out.data(),
                         static_cast<int>(values.size()), MPI_INT64_T, comm_, &req),
          "all_gather");
    wait(&req, "all_gather", false);
    return out;
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm sub;
    check(MPI_Comm_split(comm_, color, key, &sub), "split (MPI_Comm_split)");
    return std::make_unique<MpiCommunicator>(sub, true, timeout_ms_);
  }

  [[noreturn]] void abort_group(const std::string& why) override {
    std::fprintf(stderr, "densa: rank %d of %d: %s; ending the whole group\n", world_rank_, world_size(),
                 why.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] true if it did
  }

 private:
  // Adds the time from its construction to its destruction to busy_s_.
  struct Busy {
    explicit Busy(MpiCommunicator* c) : c_(c), start_(Clock::now()) {}
    ~Busy() { c_->busy_s_ += std::chrono::duration<double>(Clock::now() - start_).count(); }
    MpiCommunicator* c_;
    Clock::time_point start_;
  };

  static int world_size() {
    int n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
  }

  void check(int rc, const char* what) {
    if (rc != MPI_SUCCESS) abort_group(std::string(what) + " failed: " + mpi_error(rc));
  }

  // Polls `req` until it completes. Spins first (a step's collectives answer within
  // microseconds when every rank is healthy), then yields, then sleeps in growing steps up to
  // 1 ms so an idle follower costs no CPU. Past the timeout (unless wait_forever) the group
  // ends, naming the operation.
  void wait(MPI_Request* req, const char* what, bool wait_forever) {
    const Clock::time_point start = Clock::now();
    for (int spin = 0;; ++spin) {
      int done = 0;
      check(MPI_Test(req, &done, MPI_STATUS_IGNORE), what);
      if (done) return;
      if (spin < 2000) continue;
      const auto waited = Clock::now() - start;
      if (!wait_forever && waited > std::chrono::milliseconds(timeout_ms_)) {
        abort_group(std::string(what) + ": no answer from every rank of a group of " + std::to_string(size_) +
                    " within " + std::to_string(timeout_ms_) + " ms (a rank died or hangs)");
      }
      if (waited < std::chrono::milliseconds(2)) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(waited < std::chrono::milliseconds(50) ? std::chrono::microseconds(50)
                                                                            : std::chrono::microseconds(1000));
      }
    }
  }

  MPI_Comm comm_;
  bool owned_;
  int timeout_ms_;
  int rank_ = 0, size_ = 1, world_rank_ = 0;
  double busy_s_ = 0;
  // kAuto: the gather form for two ranks and buffers up to this many floats (one collective
  // instead of two; it moves as much data as the scatter form there), the scatter form
  // otherwise, where it moves less data and each rank adds only its slice. Measured
  // (bench/allreduce_bench.cpp, docs/performance/parallel.md): two ranks, gather 0.91x the
  // time at 32K floats, 1.15x at 128K; four ranks, the scatter form ahead at every size.
  static constexpr int64_t kGatherMaxFloats = 65536;
  AllReduceAlgorithm algorithm_ = algorithm_from_env();
  // DENSA_ALLREDUCE=gather|reduce-scatter|auto (benchmarks: A/B of the two forms in one
  // build; the results are the same bits either way).
  static AllReduceAlgorithm algorithm_from_env() {
    const char* v = std::getenv("DENSA_ALLREDUCE");
    if (v == nullptr) return AllReduceAlgorithm::kAuto;
    const std::string s(v);
    if (s == "gather") return AllReduceAlgorithm::kGather;
    if (s == "reduce-scatter") return AllReduceAlgorithm::kReduceScatter;
    if (s != "auto") {
      std::fprintf(stderr, "densa: DENSA_ALLREDUCE=%s: want gather, reduce-scatter or auto\n", v);
      std::_Exit(2);
    }
    return AllReduceAlgorithm::kAuto;
  }
  std::vector<float> gathered_;
  std::vector<int> counts_, displs_, mine_counts_, mine_displs_;  // reduce_scatter_gather's
};

}  // namespace

bool launched_by_mpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

Result<std::unique_ptr<Communicator>> mpi_world(int timeout_ms) {
  if (timeout_ms < 1) return invalid_argument("communicator timeout must be >= 1 ms");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
      return unavailable("MPI_Init_thread failed");
    }
    static MpiSession session;
    if (provided < MPI_THREAD_SERIALIZED) {
      return unavailable("this MPI library gives thread level " + std::to_string(provided) +
                         ", densa needs MPI_THREAD_SERIALIZED");
    }
  }
  return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, false, timeout_ms));
}

}  // namespace densa
