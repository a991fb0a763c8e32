// packed-bert launch: starts the workers of a data-parallel run on this node,
// with the environment torchrun gives its workers, and watches them.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "app/commands.h"
#include "app/runtime.h"
#include "common/logging.h"
#include "common/status.h"

extern char** environ;

namespace pbert::app {
namespace {

volatile std::sig_atomic_t pending_signal = 0;

void OnSignal(int signal) { pending_signal = signal; }

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  int out = -1, err = -1;        // read ends of its stdout and stderr
  std::string out_line, err_line;  // a line not yet complete
  bool running = false;
  int status = 0;
};

// Prints the complete lines of `buffer` to `stream`, each after `prefix`;
// keeps an incomplete last line unless `flush`.
void EmitLines(std::string* buffer, FILE* stream, const std::string& prefix, bool flush) {
  size_t start = 0;
  for (size_t end; (end = buffer->find('\n', start)) != std::string::npos; start = end + 1) {
    std::fprintf(stream, "%s%.*s\n", prefix.c_str(), static_cast<int>(end - start),
                 buffer->data() + start);
  }
  buffer->erase(0, start);
  if (flush && !buffer->empty()) {
    std::fprintf(stream, "%s%s\n", prefix.c_str(), buffer->c_str());
    buffer->clear();
  }
  std::fflush(stream);
}

// Reads what is there; returns false at end of file.
bool Drain(int fd, std::string* buffer) {
  char chunk[65536];
  ssize_t n = ::read(fd, chunk, sizeof(chunk));
  if (n > 0) buffer->append(chunk, static_cast<size_t>(n));
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR));
}

std::string Describe(int status) {
  if (WIFSIGNALED(status)) {
    return absl::StrCat("was killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)),
                        ")");
  }
  return absl::StrCat("exited with code ", WEXITSTATUS(status));
}

bool Failed(int status) { return WIFSIGNALED(status) || WEXITSTATUS(status) != 0; }

// An executable file: `name` itself if it has a slash, else on PATH, as
// execvp looks for it.
bool IsProgram(const std::string& name) {
  auto runnable = [](const std::string& path) {
    struct stat info;
    return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
           ::access(path.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) return runnable(name);
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    if (runnable(absl::StrCat(dir.empty() ? "." : dir, "/", name))) return true;
  }
  return false;
}

struct LaunchOptions {
  int nproc = 1, nnodes = 1, node_rank = 0, master_port = 29500, max_restarts = 0;
  int grace_s = 30;
  std::string master_addr = "127.0.0.1";
  std::vector<std::string> command;
};

// Starts the workers of one attempt.
absl::StatusOr<std::vector<Worker>> Start(const LaunchOptions& o, int attempt,
                                          const std::string& run_id) {
  const int world = o.nproc * o.nnodes;
  const int threads = std::max(1, AvailableCpus() / o.nproc);
  std::vector<Worker> workers(o.nproc);
  for (int local = 0; local < o.nproc; ++local) {
    Worker& w = workers[local];
    w.rank = o.node_rank * o.nproc + local;
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot make pipes: ", strerror(errno)));
    }
    std::vector<std::pair<std::string, std::string>> env = {
        {"RANK", std::to_string(w.rank)},
        {"WORLD_SIZE", std::to_string(world)},
        {"LOCAL_RANK", std::to_string(local)},
        {"LOCAL_WORLD_SIZE", std::to_string(o.nproc)},
        {"GROUP_RANK", std::to_string(o.node_rank)},
        {"GROUP_WORLD_SIZE", std::to_string(o.nnodes)},
        {"ROLE_RANK", std::to_string(w.rank)},
        {"ROLE_WORLD_SIZE", std::to_string(world)},
        {"MASTER_ADDR", o.master_addr},
        {"MASTER_PORT", std::to_string(o.master_port)},
        {"TORCHELASTIC_RESTART_COUNT", std::to_string(attempt)},
        {"TORCHELASTIC_MAX_RESTARTS", std::to_string(o.max_restarts)},
        {"TORCHELASTIC_RUN_ID", run_id},
    };
    // Threads split over the local workers, unless the user chose.
    if (std::getenv("OMP_NUM_THREADS") == nullptr) {
      env.push_back({"OMP_NUM_THREADS", std::to_string(threads)});
    }
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) return absl::ResourceExhaustedError(absl::StrCat("fork: ", strerror(errno)));
    if (pid == 0) {
      ::setpgid(0, 0);  // signals reach the workers through launch only
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      ::unsetenv("TORCHELASTIC_USE_AGENT_STORE");
      for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
      std::vector<char*> argv;
      for (const std::string& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      std::fprintf(stderr, "packed-bert launch: cannot run %s: %s\n", argv[0], strerror(errno));
      ::_exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    w.pid = pid;
    w.out = out[0];
    w.err = err[0];
    w.running = true;
  }
  return workers;
}

// Waits up to 200 ms for output of the workers and prints what came, each
// line after its rank.
void RelayOutput(std::vector<Worker>& workers) {
  std::vector<pollfd> fds;
  std::vector<std::pair<Worker*, bool>> owners;  // worker, is stderr
  for (Worker& w : workers) {
    if (w.out >= 0) {
      fds.push_back({w.out, POLLIN, 0});
      owners.push_back({&w, false});
    }
    if (w.err >= 0) {
      fds.push_back({w.err, POLLIN, 0});
      owners.push_back({&w, true});
    }
  }
  ::poll(fds.data(), fds.size(), 200);
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    Worker& w = *owners[i].first;
    const bool is_err = owners[i].second;
    std::string* buffer = is_err ? &w.err_line : &w.out_line;
    const bool open = Drain(fds[i].fd, buffer);
    EmitLines(buffer, is_err ? stderr : stdout, absl::StrCat("[rank ", w.rank, "] "), !open);
    if (!open) {
      ::close(fds[i].fd);
      (is_err ? w.err : w.out) = -1;
    }
  }
}

// The processes launch has become the parent of: its workers, and
// descendants of theirs whose parents have ended (launch is their
// subreaper), also those that left the worker's process group.
std::vector<pid_t> Children() {
  std::vector<pid_t> out;
  const std::string path = absl::StrCat("/proc/", ::getpid(), "/task/", ::getpid(), "/children");
  FILE* file = std::fopen(path.c_str(), "r");
  if (file == nullptr) return out;
  long pid;
  while (std::fscanf(file, "%ld", &pid) == 1) out.push_back(static_cast<pid_t>(pid));
  std::fclose(file);
  return out;
}

// Sends `sig` once to every process: to every worker's process group (each
// worker leads one, with the processes it started), then to each child of
// launch outside those groups (descendants that left them and were handed
// to launch). Once, because a second SIGTERM ends a train at once, where the
// first lets it finish its step and save: a worker is both a group leader
// and a child of launch.
void SignalAll(const std::vector<Worker>& workers, int sig) {
  std::vector<pid_t> groups;
  for (const Worker& w : workers) {
    ::kill(-w.pid, sig);
    groups.push_back(w.pid);
  }
  for (pid_t child : Children()) {
    const pid_t group = ::getpgid(child);
    if (std::find(groups.begin(), groups.end(), group) == groups.end()) ::kill(child, sig);
  }
}

// Reaps every ended child: the workers (their status kept) and orphaned
// descendants handed to launch.
void Reap(std::vector<Worker>& workers) {
  int status = 0;
  for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
    for (Worker& w : workers) {
      if (w.running && w.pid == pid) {
        w.running = false;
        w.status = status;
      }
    }
  }
}

// One attempt's workers, watched until every worker and every process
// they started has ended. When one fails (or a signal asks launch to
// stop), the others are asked to stop with SIGTERM and killed with SIGKILL
// after `o.grace_s`: whatever they do, launch returns soon after the grace
// period.
class Watcher {
 public:
  using Clock = std::chrono::steady_clock;

  Watcher(std::vector<Worker>& workers, const LaunchOptions& o) : workers_(workers), o_(o) {}

  // Returns the first failure ("" if none) and whether a stop was requested
  // by a signal.
  std::string Run(bool* stopped) {
    for (;;) {
      RelayOutput(workers_);
      PassSignal(stopped);
      NoteFailures(*stopped);
      bool workers_running = false, pipes_open = false;
      for (const Worker& w : workers_) {
        workers_running = workers_running || w.running;
        pipes_open = pipes_open || w.out >= 0 || w.err >= 0;
      }
      if (!workers_running && (!pipes_open || Clock::now() >= give_up_at_)) {
        EndStragglers();
        return failure_;
      }
      if (!workers_running && give_up_at_ == Clock::time_point::max()) {
        // The workers are gone but something they started holds their
        // output open: it gets the grace period, as workers do.
        Stop(SIGTERM);
        give_up_at_ = kill_at_ + std::chrono::seconds(1);
      }
      if (Clock::now() >= kill_at_) KillAfterGrace();
    }
  }

 private:
  void Stop(int sig) {
    SignalAll(workers_, sig);
    kill_at_ = std::min(kill_at_, Clock::now() + std::chrono::seconds(o_.grace_s));
  }

  // A signal launch received goes on to the workers.
  void PassSignal(bool* stopped) {
    if (pending_signal == 0) return;
    const int sig = pending_signal;
    pending_signal = 0;
    *stopped = true;
    logging::Get("launch")->warn("{}: passing it to the workers", strsignal(sig));
    Stop(sig);
  }

  // Reaps the ended workers; the first that failed stops the others. A
  // worker that a signal ends while the job stops (but for launch's own
  // SIGKILL after the grace period) is named too: a rank that crashes or
  // dies without a word of its own is said to have.
  void NoteFailures(bool stopped) {
    std::vector<bool> was_running;
    for (const Worker& w : workers_) was_running.push_back(w.running);
    Reap(workers_);
    for (size_t i = 0; i < workers_.size(); ++i) {
      const Worker& w = workers_[i];
      if (!was_running[i] || w.running || !Failed(w.status)) continue;
      if (failure_.empty() && !stopped) {
        failure_ = absl::StrCat("rank ", w.rank, " ", Describe(w.status));
        logging::Get("launch")->error("{}; stopping the other workers", failure_);
        Stop(SIGTERM);
      } else if (WIFSIGNALED(w.status) && !killed_after_grace_) {
        logging::Get("launch")->warn("rank {} {} while the job stopped", w.rank,
                                     Describe(w.status));
      }
    }
  }

  // Descendants left behind (their output pipes keep them visible) go too,
  // and the pipes are closed.
  void EndStragglers() {
    if (!Children().empty()) {
      SignalAll(workers_, SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      Reap(workers_);
    }
    for (Worker& w : workers_) {
      for (int* fd : {&w.out, &w.err}) {
        if (*fd >= 0) ::close(std::exchange(*fd, -1));
      }
    }
  }

  void KillAfterGrace() {
    logging::Get("launch")->error(
        "workers (or processes they started) still running {} s after being asked to stop: "
        "killing them",
        o_.grace_s);
    SignalAll(workers_, SIGKILL);
    killed_after_grace_ = true;
    kill_at_ = Clock::time_point::max();
    give_up_at_ = std::min(give_up_at_, Clock::now() + std::chrono::seconds(1));
  }

  std::vector<Worker>& workers_;
  const LaunchOptions& o_;
  std::string failure_;
  Clock::time_point kill_at_ = Clock::time_point::max(), give_up_at_ = Clock::time_point::max();
  bool killed_after_grace_ = false;
};

absl::StatusOr<LaunchOptions> ReadLaunchOptions(const Args& args) {
  LaunchOptions o;
  ASSIGN_OR_RETURN(int64_t nproc, args.GetInt("nproc-per-node", 1, 1, 1024));
  ASSIGN_OR_RETURN(int64_t nnodes, args.GetInt("nnodes", 1, 1, 1 << 16));
  ASSIGN_OR_RETURN(int64_t node_rank, args.GetInt("node-rank", 0, 0, 1 << 16));
  ASSIGN_OR_RETURN(int64_t port, args.GetInt("master-port", 29500, 1, 65535));
  ASSIGN_OR_RETURN(int64_t restarts, args.GetInt("max-restarts", 0, 0, 1000));
  ASSIGN_OR_RETURN(int64_t grace, args.GetInt("grace-s", 30, 1, 86400));
  if (node_rank >= nnodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--node-rank ", node_rank, " is not below --nnodes ", nnodes));
  }
  o.nproc = static_cast<int>(nproc);
  o.nnodes = static_cast<int>(nnodes);
  o.node_rank = static_cast<int>(node_rank);
  o.master_port = static_cast<int>(port);
  o.max_restarts = static_cast<int>(restarts);
  o.grace_s = static_cast<int>(grace);
  o.master_addr = args.Get("master-addr", "127.0.0.1");
  o.command = args.positional();
  if (o.command.empty()) {
    return absl::InvalidArgumentError(
        "launch needs the command to run after --, e.g. launch --nproc-per-node 2 -- "
        "packed-bert train --config C.yaml");
  }
  // "packed-bert" is this very binary, wherever it is.
  if (o.command[0] == "packed-bert") {
    char self[4096];
    ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) o.command[0] = std::string(self, static_cast<size_t>(n));
  }
  if (!IsProgram(o.command[0])) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", o.command[0], "' is not a program that can be run (not found on PATH, "
        "a folder, or not executable)"));
  }
  return o;
}

absl::Status RunLaunch(const Args& args) {
  ASSIGN_OR_RETURN(const LaunchOptions o, ReadLaunchOptions(args));
  logging::Init(logging::Level::kInfo, 0);
  // Descendants whose parents end become launch's children, so that none
  // outlives the job unseen.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  auto log = logging::Get("launch");
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  const std::string run_id = absl::StrCat("packed-bert-", ::getpid());
  for (int attempt = 0;; ++attempt) {
    log->info("starting {} worker(s), ranks {}-{} of {}{}", o.nproc, o.node_rank * o.nproc,
              o.node_rank * o.nproc + o.nproc - 1, o.nproc * o.nnodes,
              attempt > 0 ? absl::StrCat(" (restart ", attempt, " of ", o.max_restarts, ")") : "");
    ASSIGN_OR_RETURN(std::vector<Worker> workers, Start(o, attempt, run_id));
    bool stopped = false;
    const std::string failure = Watcher(workers, o).Run(&stopped);
    if (failure.empty()) {
      bool all_ok = true;
      for (const Worker& w : workers) all_ok = all_ok && !Failed(w.status);
      if (all_ok) return absl::OkStatus();
      return absl::AbortedError("the workers were stopped by a signal before they finished");
    }
    if (stopped || attempt >= o.max_restarts) {
      return absl::AbortedError(absl::StrCat(
          failure, "; the job stopped",
          o.max_restarts > 0 ? absl::StrCat(" after ", attempt, " restart(s)") : std::string()));
    }
    log->warn("{}; restarting all workers ({} of {} restarts)", failure, attempt + 1,
              o.max_restarts);
  }
}

}  // namespace

Command LaunchCommand() {
  Command command;
  command.name = "launch";
  command.summary = "start the workers of a data-parallel run on this node";
  command.usage =
      "launch --nproc-per-node N [--nnodes M --node-rank R --master-addr A --master-port P] "
      "[--max-restarts K] -- packed-bert train ...";
  command.details =
      "Starts N copies of the command after --, with the environment torchrun gives its\n"
      "workers (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,\n"
      "MASTER_PORT, TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID)\n"
      "and OMP_NUM_THREADS set to this node's CPUs divided among them. Each output line is\n"
      "prefixed with its rank; SIGINT and SIGTERM are passed on. When a worker fails, the\n"
      "others are stopped (killed after --grace-s seconds) and launch exits non-zero; with\n"
      "restarts left it starts them all again, and train then resumes from the last\n"
      "checkpoint. On several nodes, run one launch per node with the same --nnodes,\n"
      "--master-addr and --master-port. See docs/distributed.md.";
  command.flags = {
      {"nproc-per-node", "N", "workers on this node (default 1)"},
      {"nnodes", "M", "nodes in the job (default 1)"},
      {"node-rank", "R", "this node's place among them (default 0)"},
      {"master-addr", "A", "host of rank 0, where the rendezvous is (default 127.0.0.1)"},
      {"master-port", "P", "its port (default 29500)"},
      {"max-restarts", "K", "times to start all workers again after a failure (default 0)"},
      {"grace-s", "S", "seconds stopping workers get before they are killed (default 30)"},
  };
  command.run = RunLaunch;
  return command;
}

}  // namespace pbert::app
