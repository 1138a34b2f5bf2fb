#include "tools/mpi_sweep.hpp"

#include <fmt/format.h>
#include <sched.h>

#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <new>
#include <optional>
#include <thread>

#include "tools/exit_codes.hpp"
#include "tools/resource_guard.hpp"
#include "topology/error.hpp"

#if COLLSIM_HAVE_MPI
// The C API only: Open MPI's and MPICH's deprecated C++ bindings stay out.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
#endif

namespace collsim::cli::mpi {
namespace {

// Little-endian, fixed width, whatever the host: ranks on different machines read the same bytes.
void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_string(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out += s;
}

class Reader {
 public:
  explicit Reader(const std::string& bytes) : bytes_(bytes) {}
  std::uint64_t u64() {
    need(8);
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes_[pos_ + i])) << (8 * i);
    pos_ += 8;
    return v;
  }
  double f64() { return std::bit_cast<double>(u64()); }
  std::string string() {
    const std::uint64_t n = u64();
    need(n);
    std::string s = bytes_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  void done() const {
    if (pos_ != bytes_.size()) fail();
  }

 private:
  void need(std::uint64_t n) const {
    if (n > bytes_.size() - pos_) fail();
  }
  [[noreturn]] void fail() const {
    throw InternalError(
        fmt::format("a sweep result received from another rank is malformed ({} "
                    "bytes); are all ranks running the same collsim?",
                    bytes_.size()));
  }
  const std::string& bytes_;
  std::size_t pos_ = 0;
};

// A positive integer from the environment, or 0.
int env_count(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  return *end == '\0' && v > 0 && v < (1L << 30) ? static_cast<int>(v) : 0;
}

}  // namespace

int launcher_world_size() {
  // Open MPI's mpirun, then the PMI of MPICH's Hydra and of Slurm.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const int n = env_count(name); n > 0) return n;
  for (const char* name : {"PMIX_RANK", "PMI_RANK"})
    if (std::getenv(name) != nullptr) return 0;
  return 1;
}

unsigned usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<unsigned>(n);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

std::string encode(std::size_t index, const Evaluation& ev) {
  const Row& r = ev.row;
  std::string out;
  out.reserve(128 + r.algo.size() + r.topology.size() + r.error.size());
  put_u64(out, index);
  put_u64(out, static_cast<std::uint64_t>(r.collective));
  put_u64(out, static_cast<std::uint64_t>(r.dtype));
  put_u64(out, (ev.internal_error ? 1u : 0u) | (ev.interrupted ? 2u : 0u));
  put_u64(out, r.ranks);
  put_u64(out, r.size);
  put_u64(out, r.chunks);
  put_u64(out, r.events);
  for (double v : {r.time, r.wall, ev.terms.copy, ev.terms.link})
    put_u64(out, std::bit_cast<std::uint64_t>(v));
  put_string(out, r.algo);
  put_string(out, r.topology);
  put_string(out, r.error);
  return out;
}

Evaluation decode(const std::string& bytes, std::size_t& index) {
  Reader in(bytes);
  Evaluation ev;
  Row& r = ev.row;
  index = static_cast<std::size_t>(in.u64());
  r.collective = static_cast<sched::Collective>(in.u64());
  r.dtype = static_cast<sched::DType>(in.u64());
  const std::uint64_t flags = in.u64();
  ev.internal_error = (flags & 1u) != 0;
  ev.interrupted = (flags & 2u) != 0;
  r.ranks = static_cast<std::uint32_t>(in.u64());
  r.size = in.u64();
  r.chunks = static_cast<std::uint32_t>(in.u64());
  r.events = in.u64();
  r.time = in.f64();
  r.wall = in.f64();
  ev.terms.copy = in.f64();
  ev.terms.link = in.f64();
  r.algo = in.string();
  r.topology = in.string();
  r.error = in.string();
  in.done();
  return ev;
}

Failure describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const InputError& e) {
    return {kExitUsage, fmt::format("error: {}", e.what())};
  } catch (const CheckFailed& e) {
    return {kExitCheckFailed, fmt::format("check failed: {}", e.what())};
  } catch (const Interrupted& e) {
    return {kExitInterrupted, fmt::format("collsim: {}", e.what())};
  } catch (const std::bad_alloc&) {
    return {kExitInternal, "error: out of memory; try a smaller problem or --max-memory"};
  } catch (const std::exception& e) {
    return {kExitInternal, fmt::format("internal error: {}\nThis is a bug in collsim. Please "
                                       "report it with the command line and the input files "
                                       "attached.",
                                       e.what())};
  } catch (...) {
    return {kExitInternal, "internal error: an unknown exception"};
  }
}

#if COLLSIM_HAVE_MPI

namespace {

constexpr int kTagResult = 1;
constexpr int kTagDone = 2;
// How long a waiting rank sleeps between polls: Open MPI's blocking calls spin, which would take
// a core from the ranks still computing on the same machine.
constexpr auto kPollInterval = std::chrono::milliseconds(2);

void check(int status, const char* call) {
  if (status != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING] = {};
    int length = 0;
    MPI_Error_string(status, text, &length);
    throw InternalError(fmt::format("{} failed: {}", call, text));
  }
}

constexpr int kTagRequest = 3;
constexpr int kTagPoints = 4;

// A message with `tag` from rank `from` (MPI_ANY_SOURCE: any) if one has arrived, as a Buffer of
// elements of `type`; `source` is set to its sender.
template <typename Buffer>
std::optional<Buffer> try_receive(int from, int tag, MPI_Datatype type, int& source) {
  int arrived = 0;
  MPI_Status status;
  check(MPI_Iprobe(from, tag, MPI_COMM_WORLD, &arrived, &status), "MPI_Iprobe");
  if (!arrived) return std::nullopt;
  int count = 0;
  check(MPI_Get_count(&status, type, &count), "MPI_Get_count");
  Buffer buffer(static_cast<std::size_t>(count), {});
  source = status.MPI_SOURCE;
  check(MPI_Recv(buffer.data(), count, type, source, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
        "MPI_Recv");
  return buffer;
}

// A rank's request for points (how many it wants; none when it was interrupted), if one has
// arrived.
std::optional<int> try_receive_request(int& source) {
  const auto wanted = try_receive<std::vector<int>>(MPI_ANY_SOURCE, kTagRequest, MPI_INT, source);
  if (!wanted) return std::nullopt;
  if (wanted->size() != 1 || wanted->front() < 0)
    throw InternalError(fmt::format("rank {} sent a malformed request for points", source));
  return wanted->front();
}

// Completes a request, sleeping between tests.
void wait_politely(MPI_Request& request) {
  for (;;) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    std::this_thread::sleep_for(kPollInterval);
  }
}

}  // namespace

// Messages sent without waiting for each: their buffers stay alive until every send is complete.
class World::Sends {
 public:
  void send(std::string text, int to) {
    texts_.push_back(std::move(text));
    start(texts_.back().data(), static_cast<int>(texts_.back().size()), MPI_CHAR, to, kTagResult);
  }
  void send(std::vector<std::uint64_t> batch, int to) {
    batches_.push_back(std::move(batch));
    start(batches_.back().data(), static_cast<int>(batches_.back().size()), MPI_UINT64_T, to,
          kTagPoints);
  }
  // Lets MPI move the messages; with `wait`, until all are sent.
  void advance(bool wait) {
    for (;;) {
      int done = 0;
      check(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done,
                        MPI_STATUSES_IGNORE),
            "MPI_Testall");
      if (done) {
        requests_.clear();
        texts_.clear();
        batches_.clear();
      }
      if (done || !wait) return;
      std::this_thread::sleep_for(kPollInterval);
    }
  }

 private:
  void start(void* data, int count, MPI_Datatype type, int to, int tag) {
    requests_.emplace_back();
    check(MPI_Isend(data, count, type, to, tag, MPI_COMM_WORLD, &requests_.back()), "MPI_Isend");
  }
  std::deque<std::string> texts_;
  std::deque<std::vector<std::uint64_t>> batches_;
  std::vector<MPI_Request> requests_;
};

bool built_with_mpi() {
  return true;
}

World::World() : uncaught_(std::uncaught_exceptions()) {
  int initialized = 0;
  check(MPI_Initialized(&initialized), "MPI_Initialized");
  if (initialized) throw InternalError("MPI was initialised twice");
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  // Errors come back as codes, so that check() reports them like any other failure.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
}

World::~World() {
  if (finalized_) return;
  // An exception is leaving a phase that the other ranks are still in: they would wait forever.
  if (std::uncaught_exceptions() > uncaught_) MPI_Abort(MPI_COMM_WORLD, kExitInternal);
  finalize();
}

void World::finalize() {
  if (finalized_) return;
  finalized_ = true;
  MPI_Finalize();
}

void World::abort(const std::exception_ptr& error) {
  const Failure f = describe(error);
  std::fprintf(stderr, "%s%s\n", rank_ == 0 ? "" : fmt::format("rank {}: ", rank_).c_str(),
               f.message.c_str());
  std::fflush(nullptr);
  MPI_Abort(MPI_COMM_WORLD, f.code);
  std::_Exit(f.code);
}

void World::agree(const std::exception_ptr& error) {
  const int mine = error ? describe(error).code : 0;
  std::vector<int> codes(static_cast<std::size_t>(size_), 0);
  MPI_Request request;
  check(MPI_Iallgather(&mine, 1, MPI_INT, codes.data(), 1, MPI_INT, MPI_COMM_WORLD, &request),
        "MPI_Iallgather");
  wait_politely(request);
  int first = -1;
  int code = 0;
  for (int r = 0; r < size_; ++r) {
    const int c = codes[static_cast<std::size_t>(r)];
    if (c == 0) continue;
    if (first < 0) first = r;
    code = std::max(code, c);
  }
  if (first < 0) return;
  // Said before MPI_Finalize: once rank 0 exits with an error status, mpirun ends the others.
  if (rank_ == first && rank_ != 0)
    std::fprintf(stderr, "rank %d: %s\n", rank_, describe(error).message.c_str());
  std::fflush(nullptr);
  finalize();
  if (rank_ != 0) std::exit(kExitOk);
  if (error) std::rethrow_exception(error);
  const std::string message =
      fmt::format("MPI rank {} of {} could not start the sweep (its error is above)", first, size_);
  if (code == kExitUsage) throw InputError("", "sweep", message);
  throw InternalError(message);
}

void World::run_points(const Context& context, const std::vector<Point>& points,
                       const std::string& topology_name, unsigned jobs,
                       const std::function<void(std::size_t, const Evaluation&)>& emit,
                       const std::function<void(std::size_t, std::size_t, double)>& progress) {
  jobs = std::max(1u, jobs);
  if (rank_ != 0) {
    work_for_rank0(context, points, topology_name, jobs);
    return;
  }
  const std::size_t total = points.size();
  // Each rank's threads, and rank 0's own, take points as they free up, heaviest first.
  Dispenser dispenser(estimated_costs(context, points),
                      static_cast<std::size_t>(size_) * std::size_t{jobs});
  std::vector<int> owner(total, -1);
  PointPool pool(context, points, topology_name, jobs, static_cast<bool>(progress));
  Sends replies;
  std::vector<std::optional<Evaluation>> pending(total);
  std::size_t emitted = 0;
  std::size_t done = 0;
  int closed = 0;  // ranks told that no point is left
  const auto keep = [&](std::size_t i, Evaluation ev) {
    pending[i] = std::move(ev);
    ++done;
  };
  while (emitted < total || closed < size_ - 1) {
    while (pool.unfinished() < jobs && dispenser.left() > 0)
      for (const std::size_t i : dispenser.take(1)) {
        owner[i] = 0;
        pool.add(i);
      }
    int source = 0;
    while (const auto wanted = try_receive_request(source)) {
      std::vector<std::uint64_t> batch;
      // Asking for none: the rank was interrupted and leaves its share to the others.
      if (*wanted > 0)
        for (const std::size_t i : dispenser.take(static_cast<std::size_t>(*wanted))) {
          owner[i] = source;
          batch.push_back(i);
        }
      if (batch.empty()) ++closed;
      replies.send(std::move(batch), source);
    }
    while (auto bytes = try_receive<std::string>(MPI_ANY_SOURCE, kTagResult, MPI_CHAR, source)) {
      std::size_t i = 0;
      Evaluation ev = decode(*bytes, i);
      if (i >= total || owner[i] != source || source == 0 || pending[i] || i < emitted)
        throw InternalError(fmt::format(
            "rank 0 received an unexpected result for point {} from rank {}", i + 1, source));
      keep(i, std::move(ev));
    }
    for (auto& [i, ev] : pool.finished(kPollInterval)) keep(i, std::move(ev));
    for (; emitted < total && pending[emitted]; ++emitted) {
      emit(emitted, *pending[emitted]);
      pending[emitted].reset();
    }
    replies.advance(false);
    if (progress) progress(done, total, pool.running());
  }
  replies.advance(true);
}

void World::work_for_rank0(const Context& context, const std::vector<Point>& points,
                           const std::string& topology_name, unsigned jobs) {
  PointPool pool(context, points, topology_name, jobs);
  // No point queued beyond the threads: one queued here would be this rank's even if another
  // rank frees up first, and at the end of a sweep of long points that costs a whole point. The
  // price is a round trip to rank 0 per request, a few milliseconds.
  const std::size_t depth = jobs;
  Sends results;
  int wanted = 0;
  MPI_Request ask = MPI_REQUEST_NULL;
  bool asked = false;
  bool closed = false;
  int sender = 0;  // always rank 0
  for (;;) {
    if (!closed && !asked && pool.unfinished() < depth) {
      // Interrupted (SIGINT to this rank): the points it runs stop, and it asks for none, so that
      // the other ranks take the rest of the sweep.
      const bool interrupted =
          context.cancel != nullptr && context.cancel->load(std::memory_order_relaxed);
      wanted = interrupted ? 0 : static_cast<int>(depth - pool.unfinished());
      check(MPI_Isend(&wanted, 1, MPI_INT, 0, kTagRequest, MPI_COMM_WORLD, &ask), "MPI_Isend");
      asked = true;
    }
    if (asked) {
      if (auto batch =
              try_receive<std::vector<std::uint64_t>>(0, kTagPoints, MPI_UINT64_T, sender)) {
        wait_politely(ask);  // rank 0 has answered, so it has the request
        asked = false;
        for (const std::uint64_t i : *batch) {
          if (i >= points.size())
            throw InternalError(
                fmt::format("rank 0 handed out point {} of {}", i + 1, points.size()));
          pool.add(static_cast<std::size_t>(i));
        }
        if (batch->empty()) {
          closed = true;
          pool.close();
        }
      }
    }
    // Results leave as they come, without waiting for each send.
    for (const auto& [i, ev] : pool.finished(kPollInterval)) results.send(encode(i, ev), 0);
    results.advance(false);
    if (closed && pool.unfinished() == 0) break;
  }
  results.advance(true);
}

void World::finish() {
  int token = 0;
  if (rank_ == 0) {
    std::vector<MPI_Request> requests(static_cast<std::size_t>(size_ - 1));
    for (int r = 1; r < size_; ++r)
      check(MPI_Isend(&token, 1, MPI_INT, r, kTagDone, MPI_COMM_WORLD,
                      &requests[static_cast<std::size_t>(r - 1)]),
            "MPI_Isend");
    for (MPI_Request& request : requests) wait_politely(request);
  } else {
    MPI_Request request;
    check(MPI_Irecv(&token, 1, MPI_INT, 0, kTagDone, MPI_COMM_WORLD, &request), "MPI_Irecv");
    wait_politely(request);
  }
  finalize();
}

#else  // built without MPI: World never starts, so nothing below it is reached.

bool built_with_mpi() {
  return false;
}

World::World() {
  throw InputError("", "sweep",
                   "this collsim was built without MPI, so it cannot divide a sweep among the "
                   "processes mpirun started (each would run the whole sweep); run it without "
                   "mpirun, or rebuild with Open MPI installed (libopenmpi-dev) and "
                   "-DCOLLSIM_MPI=ON");
}
World::~World() = default;
void World::finalize() {
  finalized_ = true;
  uncaught_ = 0;
}
void World::abort(const std::exception_ptr& error) {
  std::rethrow_exception(error);
}
void World::agree(const std::exception_ptr& error) {
  if (error) std::rethrow_exception(error);
}
void World::run_points(const Context& context, const std::vector<Point>& points,
                       const std::string& topology_name, unsigned jobs,
                       const std::function<void(std::size_t, const Evaluation&)>& emit,
                       const std::function<void(std::size_t, std::size_t, double)>& progress) {
  cli::run_points(context, points, topology_name, jobs, emit, progress);
}
void World::finish() {}

#endif

}  // namespace collsim::cli::mpi
