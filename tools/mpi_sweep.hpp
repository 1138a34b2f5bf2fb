#pragma once
// The MPI mode of `collsim sweep`: under `mpirun -n N`, rank 0 hands the points out on demand,
// heaviest first by estimated cost (Dispenser in tools/sweep.hpp), to every rank's --jobs threads
// and its own, as they free up, so that a rank on a slower machine, or given points the estimate
// misjudged, takes fewer; rank 0 receives every result and emits the rows in input order through
// the same report code, so that the output is byte-identical to a single-process run.
//
// MPI is initialised only when the environment says that a launcher started more than one
// process; a plain `collsim sweep` never touches MPI. Only mpi_sweep.cpp includes <mpi.h>; when
// collsim is built without MPI (COLLSIM_MPI=OFF or MPI not found), World refuses to start, so a
// multi-process launch is refused instead of every process writing the whole sweep.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tools/sweep.hpp"

namespace collsim::cli::mpi {

// Whether this binary was built with the MPI mode.
bool built_with_mpi();

// The number of processes a launcher started, from its environment (OMPI_COMM_WORLD_SIZE,
// PMI_SIZE): 1 when no launcher set it. 0 when a launcher is present (PMIX_RANK, PMI_RANK) but
// did not say how many processes it started; MPI must then be asked.
int launcher_world_size();

// The CPUs this process may run on (its affinity mask, which mpirun narrows when it binds ranks
// to cores); at least 1.
unsigned usable_cpus();

// A result as it travels from a rank to rank 0. Doubles are sent as their bits, so rank 0 prints
// exactly what a single process would.
std::string encode(std::size_t index, const Evaluation& ev);
// Throws InternalError on a malformed message.
Evaluation decode(const std::string& bytes, std::size_t& index);

// The exit status main() would give an exception, and the message it would print.
struct Failure {
  int code = 0;
  std::string message;
};
Failure describe(const std::exception_ptr& error);

// MPI_COMM_WORLD for the length of one sweep. All MPI calls are made from the thread that created
// it (MPI_THREAD_FUNNELED); waits poll and sleep instead of spinning, so that a rank that waits
// leaves the cores to the ranks that compute.
class World {
 public:
  // Initialises MPI. Throws InputError when collsim was built without MPI.
  World();
  // Finalises MPI, or aborts the whole job (MPI_Abort) when an exception escapes between two
  // agreements, since the other ranks would otherwise wait forever.
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Every rank says whether its setup failed (`error` null: it did not). Returns when every rank
  // succeeded. Otherwise MPI is finalised and rank 0 throws: its own error if it failed, else one
  // naming the first rank that failed, which prints its own error first; the other ranks exit
  // with status 0, so that mpirun ends with rank 0's status and does not cut rank 0 short.
  void agree(const std::exception_ptr& error);
  // Prints the error (with the rank when it is not rank 0) and ends every rank (MPI_Abort) with
  // main()'s status for it: for failures after agree(), which the other ranks cannot know about.
  [[noreturn]] void abort(const std::exception_ptr& error);

  // Every rank evaluates the points rank 0 hands it. On rank 0, `emit` gets every row in input
  // order and `progress` (done, total, running) counts every rank's points, and the shares done
  // of rank 0's running ones; other ranks send their results to rank 0 and call neither.
  void run_points(const Context& context, const std::vector<Point>& points,
                  const std::string& topology_name, unsigned jobs,
                  const std::function<void(std::size_t, const Evaluation&)>& emit,
                  const std::function<void(std::size_t, std::size_t, double)>& progress);

  // Waits until rank 0 has every row, then finalises MPI. Rank 0 reports the sweep's outcome and
  // status for every rank; the others should then exit with status 0 (mpirun ends the whole job
  // as soon as one process exits with another status, which could cut rank 0's report short).
  void finish();

  // Finalises MPI (idempotent).
  void finalize();

 private:
  class Sends;
  // A rank other than 0: asks rank 0 for points, evaluates them and sends the results back.
  void work_for_rank0(const Context& context, const std::vector<Point>& points,
                      const std::string& topology_name, unsigned jobs);

  int rank_ = 0;
  int size_ = 1;
  bool finalized_ = false;
  int uncaught_ = 0;
};

}  // namespace collsim::cli::mpi
