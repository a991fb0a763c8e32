// Multi-process tests: the running test binary started again as the ranks
// of a data-parallel group on loopback (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT, as a launcher sets them), each running one worker test.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

extern char** environ;

namespace pbert::testing {

// A TCP port free on loopback now.
inline int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t size = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  ::close(fd);
  return ntohs(address.sin_port);
}

// Runs `world_size` copies of this test binary, filtered to `worker_test`,
// with `worker_variable`=1 and the rank's variables set; fails the test
// for each that does not exit 0 within `timeout` (then it is killed).
inline void RunRanks(const std::string& worker_test, const std::string& worker_variable,
                     int world_size, std::chrono::seconds timeout = std::chrono::seconds(120)) {
  const std::string port = std::to_string(FreePort());
  std::vector<pid_t> children;
  for (int rank = 0; rank < world_size; ++rank) {
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
    for (const std::string& v : std::vector<std::string>{
             worker_variable + "=1", "WORLD_SIZE=" + std::to_string(world_size),
             "LOCAL_WORLD_SIZE=" + std::to_string(world_size), "MASTER_ADDR=127.0.0.1",
             "GLOO_SOCKET_IFNAME=lo", "MASTER_PORT=" + port, "RANK=" + std::to_string(rank),
             "LOCAL_RANK=" + std::to_string(rank)}) {
      env_strings.push_back(v);
    }
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string filter = "--gtest_filter=" + worker_test;
    std::string self = "/proc/self/exe";
    char* argv[] = {self.data(), filter.data(), nullptr};
    pid_t pid;
    ASSERT_EQ(::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, envp.data()), 0);
    children.push_back(pid);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (pid_t pid : children) {
    int status = 0;
    pid_t done = 0;
    while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (done == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "rank " << pid << " did not finish within " << timeout.count() << " s";
      continue;
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "worker " << pid << " failed";
  }
}

}  // namespace pbert::testing
