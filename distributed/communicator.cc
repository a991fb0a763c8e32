#include "distributed/communicator.h"

#include <ATen/ATen.h>
#include <c10/util/Logging.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <future>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>
#ifdef PBERT_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "absl/strings/str_cat.h"
#include "common/platform.h"
#include "common/status.h"

namespace pbert::distributed {

std::unique_ptr<Communicator> Communicator::Single() {
  return std::unique_ptr<Communicator>(new Communicator(Environment{}));
}

namespace {

// "127.0.0.1:29500 (MASTER_ADDR, MASTER_PORT)" for messages.
std::string Where(const Environment& e) {
  return absl::StrCat(e.master_addr, ":", e.master_port, " (MASTER_ADDR, MASTER_PORT)");
}

// The rendezvous host must resolve before anything waits on it.
absl::Status Resolve(const Environment& e) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int error = ::getaddrinfo(e.master_addr.c_str(), nullptr, &hints, &found);
  if (found != nullptr) ::freeaddrinfo(found);
  if (error == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("rank ", e.rank, " cannot find the rendezvous host '", e.master_addr,
                   "' (MASTER_ADDR, or dist.master_addr): ", ::gai_strerror(error),
                   "; name a host every node can resolve"));
}

// Whether something at the rendezvous address accepts a TCP connection
// within `wait`: told apart, when the rendezvous did not answer in time, a
// host where nobody listens from one where something else does.
bool AcceptsConnections(const Environment& e, std::chrono::milliseconds wait) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(e.master_port);
  if (::getaddrinfo(e.master_addr.c_str(), port.c_str(), &hints, &found) != 0) return false;
  bool accepted = false;
  for (addrinfo* a = found; a != nullptr && !accepted; a = a->ai_next) {
    const int fd =
        ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      accepted = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int error = 0;
      socklen_t size = sizeof(error);
      accepted = ::poll(&p, 1, static_cast<int>(wait.count())) == 1 &&
                 ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0 && error == 0;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return accepted;
}

// Every rank checks in and waits, up to `timeout`, for all WORLD_SIZE of
// them: a world size that cannot gather (a wrong WORLD_SIZE, a rank that
// never started) fails here, naming the count, not in the process group's
// own rendezvous, which may take much longer than the timeout to give up.
absl::Status Gather(c10d::Store& store, const Environment& e, std::chrono::milliseconds timeout,
                    std::chrono::steady_clock::time_point deadline) {
  const std::string key = "pbert/joined";
  store.add(key, 1);
  int64_t joined = 0;
  while ((joined = store.add(key, 0)) < e.world_size) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", e.rank, ": ", joined, " of WORLD_SIZE=", e.world_size,
          " ranks reached the rendezvous at ", Where(e), " within dist.timeout_s (",
          std::chrono::duration_cast<std::chrono::seconds>(timeout).count(),
          " s); start every rank, or give the launcher the number of ranks it starts"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return absl::OkStatus();
}

// What a worker thread of LibTorch's rendezvous client that fails while
// `environment` joins says it was doing (QuietStderr): a service that is
// no rendezvous can make it allocate what its answer says.
std::string Joining(const Environment& environment) {
  return absl::StrCat("rank ", environment.rank, " of ", environment.world_size,
                      " joined the rendezvous at ", Where(environment),
                      "; check that it is rank 0's or the launcher's rendezvous, not another "
                      "service, whose answers LibTorch's client takes for sizes");
}

// A service that is no rendezvous (a web server, a stale process) on the
// port: LibTorch's client throws `e` in its protocol's words (1.13 as it
// gathers: "Stop_waiting response is expected"; 2.6 as it connects).
absl::Status NotATcpStore(const Environment& environment, const std::exception& e) {
  return absl::UnavailableError(absl::StrCat(
      "rank ", environment.rank, " of ", environment.world_size, ": the rendezvous at ",
      Where(environment), " answered as no PyTorch TCPStore does (", FirstLine(e),
      "); check that it is rank 0's or the launcher's rendezvous, not another service"));
}

absl::Status GatherThrough(c10d::Store& store, const Environment& environment,
                           std::chrono::milliseconds timeout,
                           std::chrono::steady_clock::time_point deadline) {
  try {
    return Gather(store, environment, timeout, deadline);
  } catch (const std::exception& e) {
    return NotATcpStore(environment, e);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(
    const Environment& environment, Backend backend, std::chrono::milliseconds timeout,
    c10::Device device) {
  if (backend == Backend::kAuto) {
    return absl::InvalidArgumentError("Communicator::Create needs a resolved backend");
  }
#ifndef PBERT_WITH_NCCL
  if (backend == Backend::kNccl) {
    return absl::InvalidArgumentError(
        "dist.backend nccl needs a CUDA build of LibTorch; this build has gloo only: set "
        "dist.backend to gloo or auto");
  }
#endif
  if (!environment.distributed()) {
    std::unique_ptr<Communicator> communicator(new Communicator(environment));
    if (backend == Backend::kNccl) communicator->device_ = device;
    return communicator;
  }
  RETURN_IF_ERROR(Resolve(environment));
  // LibTorch's store client waits without a bound on a host that accepts
  // the connection and never answers (another service on the port): the
  // rendezvous runs on a thread of its own, and this one waits for it up to
  // the timeout, and a little more, so that the rendezvous' own reports
  // (which name the ranks missing) come first when they apply.
  constexpr auto kOwnReportsFirst = std::chrono::seconds(2);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::packaged_task<absl::StatusOr<std::unique_ptr<Communicator>>()> join(
      [=] { return Join(environment, backend, timeout, device, deadline); });
  auto joined = join.get_future();
  // What LibTorch writes to stderr meanwhile is kept off the terminal.
  QuietStderr quiet(Joining(environment));
  std::thread(std::move(join)).detach();
  if (joined.wait_until(deadline + kOwnReportsFirst) != std::future_status::ready) {
    // The thread stays blocked; the process ends with the error. The store
    // client it is in may still log its own timeout after stderr is back
    // (under load it gives up later than this wait): LibTorch's logs below
    // fatal are silenced for the rest of the process, so that the error
    // stays one line.
    FLAGS_caffe2_log_level = 3;
    const int64_t seconds = std::chrono::duration_cast<std::chrono::seconds>(timeout).count();
    if (!AcceptsConnections(environment, std::chrono::seconds(1))) {
      return absl::UnavailableError(absl::StrCat(
          "rank ", environment.rank, " cannot reach the rendezvous at ", Where(environment),
          ": nobody listens there (rank 0 not started, or another port) (no answer within "
          "dist.timeout_s, ",
          seconds, " s)"));
    }
    return absl::UnavailableError(absl::StrCat(
        "rank ", environment.rank, " of ", environment.world_size, ": the rendezvous at ",
        Where(environment), " accepted the connection but did not answer within dist.timeout_s (",
        seconds,
        " s); check that it is rank 0's or the launcher's rendezvous, not another service"));
  }
  return joined.get();
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Join(
    const Environment& environment, Backend backend, std::chrono::milliseconds timeout,
    c10::Device device, std::chrono::steady_clock::time_point deadline) {
  std::unique_ptr<Communicator> communicator(new Communicator(environment));
  if (backend == Backend::kNccl) communicator->device_ = device;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(environment.master_port);
    options.timeout = timeout;
    torch_compat::UseClassicTcpStore(options);
    options.isServer = !environment.use_agent_store && environment.rank == 0;
    store = c10::make_intrusive<c10d::TCPStore>(environment.master_addr, options);
    if (environment.use_agent_store) {
      // torchrun's agent hosts the store; each restart of the workers keeps
      // its keys apart, as PyTorch's own workers do.
      store = c10::make_intrusive<c10d::PrefixStore>(
          absl::StrCat("/worker/attempt_", environment.restart_count), store);
    }
  } catch (const std::exception& e) {
    const bool server = environment.rank == 0 && !environment.use_agent_store;
    // Refused by a service that accepted the connection (LibTorch 2.6
    // checks the store's answer as it connects): not "nobody listens".
    if (!server && AcceptsConnections(environment, std::chrono::seconds(1))) {
      return NotATcpStore(environment, e);
    }
    // LibTorch appends its C++ stack to the message: the first line says what.
    return absl::UnavailableError(absl::StrCat(
        "rank ", environment.rank, " cannot reach the rendezvous at ", Where(environment), ": ",
        server ? "the port is in use, or not this host's"
            : "nobody listens there (rank 0 not started, or another port)",
        " (", FirstLine(e), ")"));
  }
  RETURN_IF_ERROR(GatherThrough(*store, environment, timeout, deadline));
  try {
    communicator->store_ = store;
    if (backend == Backend::kGloo) {
      auto gloo = c10d::ProcessGroupGloo::Options::create(timeout);
      // GLOO_SOCKET_IFNAME picks the network interface, as in PyTorch.
      const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
      gloo->devices.push_back(interface != nullptr && *interface != '\0'
                                  ? c10d::ProcessGroupGloo::createDeviceForInterface(interface)
                                  : c10d::ProcessGroupGloo::createDefaultDevice());
      communicator->group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(
          store, environment.rank, environment.world_size, gloo);
    } else {
#ifdef PBERT_WITH_NCCL
      auto nccl = c10d::ProcessGroupNCCL::Options::create();
      nccl->timeout = timeout;
      communicator->group_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(
          store, environment.rank, environment.world_size, nccl);
#endif
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("rank ", environment.rank, " of ", environment.world_size,
                     " cannot form the process group at ", Where(environment), ": ", FirstLine(e)));
  }
  return communicator;
}

Communicator::Communicator(Environment environment)
    : environment_(std::move(environment)), pending_(std::make_unique<Pending>()) {}

Communicator::~Communicator() = default;

// The work of the sums started and not yet waited for. 1.13's c10d names
// it ProcessGroup::Work, 2.x Work: kept as what allreduce returns.
struct Communicator::Pending {
  std::mutex mu;
  std::vector<decltype(std::declval<torch_compat::CollectiveBackend&>().allreduce(
      std::declval<std::vector<at::Tensor>&>()))>
      work;
  // Sums taken in fp32 for Gloo, which has no bf16: (fp32 copy, tensor),
  // copied back once waited for.
  std::vector<std::pair<at::Tensor, at::Tensor>> widened;
};

void Communicator::StartSum(const at::Tensor& tensor) {
  if (!group_) return;
  std::vector<at::Tensor> tensors = {tensor};
  std::lock_guard<std::mutex> lock(pending_->mu);
  if (tensor.scalar_type() == at::kBFloat16 && !tensor.is_cuda()) {
    tensors = {tensor.to(at::kFloat)};
    pending_->widened.emplace_back(tensors.front(), tensor);
  }
  pending_->work.push_back(group_->allreduce(tensors));
}

void Communicator::WaitForSums() {
  if (!group_) return;
  std::lock_guard<std::mutex> lock(pending_->mu);
  // Waited for in the order started; a failed one throws, and the rest are
  // dropped with it (the run ends).
  auto work = std::move(pending_->work);
  pending_->work.clear();
  auto widened = std::move(pending_->widened);
  pending_->widened.clear();
  for (auto& w : work) w->wait();
  at::NoGradGuard no_grad;
  for (auto& [sum, tensor] : widened) tensor.copy_(sum);
}

std::vector<double> Communicator::Sum(std::vector<double> values) {
  if (!group_ || values.empty()) return values;
  std::vector<at::Tensor> tensor = {
      at::from_blob(values.data(), {static_cast<int64_t>(values.size())}, at::kDouble)
          .to(device_, at::kDouble, /*non_blocking=*/false, /*copy=*/true)};
  group_->allreduce(tensor)->wait();
  const at::Tensor host = tensor[0].to(at::kCPU);
  auto accessor = host.accessor<double, 1>();
  for (size_t i = 0; i < values.size(); ++i) values[i] = accessor[i];
  return values;
}

void Communicator::SumInPlace(const at::Tensor& values) {
  if (!group_) return;
  std::vector<at::Tensor> tensors = {values};
  group_->allreduce(tensors)->wait();
}

void Communicator::MaxInPlace(const at::Tensor& values) {
  if (!group_) return;
  std::vector<at::Tensor> tensors = {values};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  group_->allreduce(tensors, options)->wait();
}

void Communicator::Broadcast(const std::vector<at::Tensor>& tensors) {
  if (!group_ || tensors.empty()) return;
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> flat = {at::flatten_dense_tensors(tensors)};
  group_->broadcast(flat)->wait();
  auto pieces = at::unflatten_dense_tensors(flat[0], tensors);
  for (size_t i = 0; i < tensors.size(); ++i) tensors[i].copy_(pieces[i]);
}

std::string Communicator::DescribeLostRanks(std::chrono::milliseconds wait) {
  if (!store_) return "";
  auto key = [](int rank) { return absl::StrCat("pbert/alive-after-failure/", rank); };
  std::vector<int> missing;
  try {
    store_->set(key(rank()), std::vector<uint8_t>{1});
    const auto deadline = std::chrono::steady_clock::now() + wait;
    do {
      missing.clear();
      for (int r = 0; r < world_size(); ++r) {
        if (r != rank() && !store_->check({key(r)})) missing.push_back(r);
      }
      if (missing.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } while (std::chrono::steady_clock::now() < deadline);
  } catch (const std::exception&) {
    return environment_.use_agent_store
               ? "the rendezvous store (torchrun's agent) is unreachable"
               : "rank 0, which hosts the rendezvous store, is unreachable";
  }
  if (missing.empty()) return "every rank is still there";
  std::string out = missing.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < missing.size(); ++i) {
    absl::StrAppend(&out, i > 0 ? ", " : "", missing[i]);
    if (i == 7 && missing.size() > 8) {
      absl::StrAppend(&out, " and ", missing.size() - 8, " more");
      break;
    }
  }
  absl::StrAppend(&out, missing.size() == 1 ? " is" : " are", " gone or not answering");
  return out;
}

void Communicator::Barrier() {
  if (group_) group_->barrier()->wait();
}

}  // namespace pbert::distributed
