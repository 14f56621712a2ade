// A child process for the kill tests: runs the crash writer (tests/crash/crash_writer.cc) with
// its standard output in a pipe, waits for its "ready" line, then either SIGKILLs it after a
// delay or lets it finish, and returns what it printed and how it ended.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace kiln::crash_test {

struct ChildResult {
  std::string output;   // everything the child printed on stdout
  bool ready = false;   // it printed "ready\n" before it was killed or ended
  bool killed = false;  // it ended by our SIGKILL
  int exit_code = -1;   // when it exited by itself
  std::string error;    // a problem running it (fork, exec, timeout), or ""
};

class ChildProcess {
 public:
  // Starts `argv[0]` with `argv` (stdout to a pipe, stderr inherited).
  explicit ChildProcess(const std::vector<std::string>& argv) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      result_.error = "pipe failed";
      return;
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    fd_ = fds[0];
    if (pid_ < 0) result_.error = "fork failed";
  }
  ~ChildProcess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) ::close(fd_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Reads until the child printed "ready\n" (or ended, or `timeout` passed).
  bool wait_ready(std::chrono::milliseconds timeout) {
    result_.ready = wait_for("ready\n", timeout);
    return result_.ready;
  }

  // Reads until the child's output holds `text` (or it ended, or `timeout` passed).
  bool wait_for(const std::string& text, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (result_.output.find(text) == std::string::npos) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !read_some(int(left.count()))) return false;
    }
    return true;
  }

  // SIGKILLs the child after `delay` (it may have ended before), reaps it, and collects its
  // output.
  ChildResult kill_after(std::chrono::microseconds delay) {
    std::this_thread::sleep_for(delay);
    if (pid_ > 0) ::kill(pid_, SIGKILL);
    return finish(std::chrono::milliseconds(10000));
  }

  // Waits (at most `timeout`) for the child to end by itself.
  ChildResult finish(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return result_;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {  // until EOF: the child (and so the pipe's write end) is gone
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        result_.error = "the child did not end in time";
        ::kill(pid_, SIGKILL);
        break;
      }
      if (!read_some(int(left.count()))) break;
    }
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    if (WIFSIGNALED(status)) result_.killed = WTERMSIG(status) == SIGKILL;
    if (WIFEXITED(status)) result_.exit_code = WEXITSTATUS(status);
    if (result_.exit_code == 127) result_.error = "could not run the child";
    return result_;
  }

 private:
  // One read of the pipe (waiting at most `timeout_ms`); false at EOF, error or timeout.
  bool read_some(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return false;
    char buffer[4096];
    ssize_t n = ::read(fd_, buffer, sizeof buffer);
    if (n <= 0) return false;
    result_.output.append(buffer, size_t(n));
    return true;
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  bool reaped_ = false;
  ChildResult result_;
};

}  // namespace kiln::crash_test
