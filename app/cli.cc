#include "app/cli.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <new>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/folders.h"
#include "common/platform.h"
#include "common/printable.h"
#include "common/status.h"

namespace pbert::app {

std::string Args::Get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() || it->second.empty() ? fallback : it->second.back();
}

const std::vector<std::string>& Args::GetAll(const std::string& name) const {
  static const std::vector<std::string> kNone;
  auto it = values_.find(name);
  return it == values_.end() ? kNone : it->second;
}

absl::StatusOr<int64_t> Args::GetInt(const std::string& name, int64_t fallback, int64_t min,
                                     int64_t max) const {
  if (!Has(name)) return fallback;
  int64_t value;
  if (!absl::SimpleAtoi(Get(name), &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " expects an integer, got '", Get(name), "'"));
  }
  if (value < min || value > max) {
    return absl::InvalidArgumentError(
        max == std::numeric_limits<int64_t>::max()
            ? absl::StrCat("--", name, " ", value, ": must be ", min, " or more")
            : absl::StrCat("--", name, " ", value, ": must be in [", min, ", ", max, "]"));
  }
  return value;
}

std::vector<Flag> ConfigFlags() {
  return {
      {"config", "FILE", "YAML experiment config (see configs/); defaults apply without it"},
      {"set", "SECTION.KEY=VALUE", "override one config value; may be repeated", true},
      {"threads", "N", "intra-op threads (same as --set run.threads=N; 0 = all CPUs)"},
      {"log-level", "LEVEL", "trace, debug, info, warn, error or off (--set run.log_level)"},
  };
}

Flag OverwriteFlag(const std::string& replaces) {
  return {"overwrite", "",
          absl::StrCat("replace the output if it is ", replaces,
                       "; nothing else, and nothing a run keeps (run folder, checkpoint, store)")};
}

absl::Status CheckOutput(const Args& args, const std::string& path, OutputKind kind) {
  return CheckOutputTarget(path, kind, args.Has("overwrite"), "output");
}

Existing ExistingOutput(const Args& args) {
  return args.Has("overwrite") ? Existing::kReplace : Existing::kRefuse;
}

int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 0;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kDataLoss:          // a damaged input file
    case absl::StatusCode::kPermissionDenied:  // a path the user may not write or read
      return 2;
    default:
      return 1;
  }
}

std::string CommandLine::Help() const {
  std::string text =
      "packed-bert: BERT pretraining and fine-tuning on packed sequences\n\n"
      "usage: packed-bert <command> [flags]\n\ncommands:\n";
  for (const Command& c : commands_) {
    absl::StrAppend(&text, absl::StrFormat("  %-14s %s\n", c.name, c.summary));
  }
  absl::StrAppend(&text, "\nRun 'packed-bert <command> --help' for the flags of a command.\n");
  return text;
}

std::string CommandLine::Help(const Command& command) {
  std::string summary = command.summary;
  if (!summary.empty()) summary[0] = absl::ascii_toupper(static_cast<unsigned char>(summary[0]));
  std::string text = absl::StrCat("usage: packed-bert ", command.usage, "\n\n", summary, ".\n");
  if (!command.details.empty()) absl::StrAppend(&text, "\n", command.details, "\n");
  if (!command.flags.empty()) absl::StrAppend(&text, "\nflags:\n");
  for (const Flag& f : command.flags) {
    std::string left = absl::StrCat("--", f.name, f.value_name.empty() ? "" : " ", f.value_name);
    absl::StrAppend(
        &text, absl::StrFormat("  %-28s %s%s\n", left, f.help, f.required ? " (required)" : ""));
  }
  absl::StrAppend(&text, absl::StrFormat("  %-28s %s\n", "--help", "show this help"));
  return text;
}

absl::StatusOr<Args> CommandLine::Parse(const Command& command,
                                        const std::vector<std::string>& argv) {
  Args args;
  auto hint = absl::StrCat("; see 'packed-bert ", command.name, " --help'");
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg == "--") {  // the rest is not ours: a command to run (launch)
      args.positional_.insert(args.positional_.end(), argv.begin() + i + 1, argv.end());
      break;
    }
    if (!absl::StartsWith(arg, "--")) {
      args.positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    bool inline_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    const Flag* flag = nullptr;
    for (const Flag& f : command.flags) {
      if (f.name == name) flag = &f;
    }
    if (flag == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, hint));
    }
    if (flag->value_name.empty()) {
      if (inline_value) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value", hint));
      }
    } else if (!inline_value) {
      if (i + 1 >= argv.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " needs a value (", flag->value_name, ")", hint));
      }
      value = argv[++i];
    }
    auto& slot = args.values_[name];
    if (!slot.empty() && !flag->repeated) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " given twice", hint));
    }
    slot.push_back(value);
  }
  for (const Flag& f : command.flags) {
    if (f.required && !args.Has(f.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(command.name, " needs --", f.name, " ", f.value_name, hint));
    }
  }
  return args;
}

namespace {

// The command running, for a failure outside it (a worker thread's).
const char* running_command = "";

// An exception that left a command, as a status: what failed, in words.
absl::Status StatusOfException(const std::string& name) {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return OutOfMemory(name);
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the system refused (no permission, a loop of symbolic links):
    // the user's to fix, and named.
    const std::string path = e.path1().empty() ? "a path" : e.path1().string();
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", e.code().message(), "; check the path and its permissions"));
  } catch (const std::system_error& e) {
    if (e.code() == std::errc::resource_unavailable_try_again) {
      struct rlimit limit {};
      getrlimit(RLIMIT_NPROC, &limit);
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot start a thread (", e.code().message(), "; this user may run ",
                       limit.rlim_cur == RLIM_INFINITY ? std::string("any number of")
                                                       : absl::StrCat(limit.rlim_cur),
                       " processes and threads: raise ulimit -u, or lower run.threads)"));
    }
    return absl::InternalError(absl::StrCat("unexpected failure: ", FirstLine(e),
                                            " (please report it with the command line)"));
  } catch (const std::exception& e) {
    if (IsOutOfMemory(e)) return OutOfMemory(name);
    // LibTorch (c10::Error), HDF5 and the standard library report by
    // exception; the first line of the message is the one that says what.
    return absl::InternalError(absl::StrCat("unexpected failure: ", FirstLine(e),
                                            " (please report it with the command line)"));
  } catch (...) {
    return absl::InternalError(
        "unexpected failure of an unknown kind (please report it with the command line)");
  }
}

// What a crash line adds where the process runs under an address-space
// limit, under which a library's failed allocation (a thread's stack, a
// buffer) may crash instead of failing: made before any crash, as a
// signal handler cannot format.
char crash_limits[160] = "";

// A crash (a fatal signal: a bad access, an abort in a library) says so in
// one line before the process ends by the signal, as it would have: a
// launcher, a shell or Slurm still sees the signal, and nothing ends
// without a word. Only async-signal-safe calls.
void OnFatalSignal(int signal) {
  const char* name = signal == SIGSEGV  ? "SIGSEGV, a bad memory access"
                     : signal == SIGBUS ? "SIGBUS, a bad memory access"
                     : signal == SIGFPE ? "SIGFPE, an arithmetic fault"
                     : signal == SIGILL ? "SIGILL, an instruction this CPU lacks"
                                        : "SIGABRT, an abort";
  static const char kHow[] = "); please report it with the command line and its output";
  // (To the terminal's stderr also while a library's is kept off it.)
  const int fd = TerminalStderr();
  const char* doing = StderrDoing();
  const ssize_t ignored =
      ::write(fd, "packed-bert ", 12) + ::write(fd, running_command, std::strlen(running_command)) +
      ::write(fd, ": error: the process crashed (", 30) + ::write(fd, name, std::strlen(name)) +
      (*doing != '\0' ? ::write(fd, ") while ", 8) + ::write(fd, doing, std::strlen(doing)) +
                            ::write(fd, kHow + 1, sizeof(kHow) - 2)
                      : ::write(fd, kHow, sizeof(kHow) - 1)) +
      ::write(fd, crash_limits, std::strlen(crash_limits)) +
      ::write(fd, "\n", 1);
  (void)ignored;
  ::raise(signal);  // the default action again (SA_RESETHAND), at once (SA_NODEFER)
}

void InstallCrashHandlers() {
  struct rlimit limit {};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const std::string note = absl::StrCat(
        " (the address space is limited to ", limit.rlim_cur >> 20,
        " MiB (ulimit -v): an allocation that failed may be the cause; raise the limit)");
    std::snprintf(crash_limits, sizeof(crash_limits), "%s", note.c_str());
  }
  // On a stack of its own: a stack overflow leaves none to say so on.
  static char alternate[64 << 10];
  stack_t stack{};
  stack.ss_sp = alternate;
  stack.ss_size = sizeof(alternate);
  ::sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_handler = OnFatalSignal;
  action.sa_flags = SA_RESETHAND | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
    ::sigaction(signal, &action, nullptr);
}

// A worker thread's exception ends the process (std::terminate): one line
// says what it was, never a bare abort.
[[noreturn]] void OnTerminate() {
  if (std::current_exception()) {
    try {
      throw;
    } catch (const std::bad_alloc&) {
      // Nothing allocated: there may be nothing left to allocate.
      static const char kLine[] =
          "; give the process more memory (ulimit -v, the container's limit) or fewer threads "
          "(run.threads)\n";
      const int fd = TerminalStderr();
      const char* doing = StderrDoing();
      const ssize_t ignored =
          ::write(fd, "packed-bert ", 12) +
          ::write(fd, running_command, std::strlen(running_command)) +
          ::write(fd, ": error: out of memory in a worker thread", 41) +
          (*doing != '\0' ? ::write(fd, " while ", 7) + ::write(fd, doing, std::strlen(doing))
                          : ::write(fd, kLine, sizeof(kLine) - 2)) +
          ::write(fd, "\n", 1);
      (void)ignored;
      std::_Exit(1);
    } catch (...) {
    }
  }
  absl::Status status = std::current_exception() ? StatusOfException(running_command)
                                                 : absl::InternalError(
                                                       "the process was ended by std::terminate "
                                                       "(please report it with the command line)");
  const std::string doing = StderrDoing();
  const std::string line =
      absl::StrCat("packed-bert ", running_command, ": error: ", Printable(status.message()),
                   doing.empty() ? "" : absl::StrCat(" (while ", doing, ")"), "\n");
  const ssize_t ignored = ::write(TerminalStderr(), line.data(), line.size());
  (void)ignored;
  std::_Exit(ExitCodeFor(status) == 2 ? 2 : 1);
}

// The status of a command that printed its result: if it could not all be
// written (a full disk, /dev/full, a closed pipe), the command failed.
absl::Status FlushResult() {
  std::cout.flush();
  if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
    const int error = errno;
    return absl::UnavailableError(absl::StrCat(
        "the result could not be written to standard output (", std::strerror(error),
        "); it is lost: run the command again with its output going where there is room"));
  }
  return absl::OkStatus();
}

}  // namespace

void SetResumeFlag(const std::string& flag) {
  SetCpuLimitLine(absl::StrCat("packed-bert ", running_command), flag);
}

absl::Status OutOfMemory(const std::string& command) {
  const std::string limits = ExhaustedLimits(/*out_of_memory=*/true);
  return absl::ResourceExhaustedError(absl::StrCat(
      "out of memory", limits.empty() ? "" : absl::StrCat(" (", limits, ")"), "; ",
      command == "train" || command == "score"
          ? "give the process more memory, or use smaller batches (train.micro_batch_rows) or "
            "a smaller model"
          : "give the process more memory (ulimit -v, the container's limit)"));
}

const Command* CommandLine::Find(const std::string& name) const {
  for (const Command& c : commands_) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

absl::Status CommandLine::RunCommand(const Command& command,
                                     const std::vector<std::string>& rest) const {
  running_command = command.name.c_str();
  std::set_terminate(OnTerminate);
  SetCpuLimitLine(absl::StrCat("packed-bert ", command.name), "");
  // A closed pipe (`| tee` ended by the same Ctrl-C, `| head`) fails the
  // write that meets it, which the command survives (its result then
  // fails, FlushResult), instead of ending the process before an
  // interrupted run's checkpoint.
  std::signal(SIGPIPE, SIG_IGN);
  InstallCrashHandlers();
  RETURN_IF_ERROR(PrepareResourceLimits(kFilesNeeded));
  absl::StatusOr<Args> args = Parse(command, rest);
  absl::Status status;
  try {
    status = args.ok() ? command.run(*args) : args.status();
  } catch (...) {
    status = StatusOfException(command.name);
  }
  if (!status.ok()) {
    // A failure whose cause is a limit of the process's says so.
    if (const std::string limits = ExhaustedLimits(/*out_of_memory=*/false); !limits.empty()) {
      status = absl::Status(status.code(),
                            absl::StrCat(status.message(), " (", limits, ": raise the limit)"));
    }
    return status;
  }
  return FlushResult();
}

int CommandLine::Run(int argc, char** argv) const {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
      std::string(argv[1]) == "help") {
    std::cout << Help();
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  const Command* command = Find(name);
  if (command == nullptr) {
    std::cerr << "packed-bert: unknown command '" << Printable(name)
              << "'; see 'packed-bert --help'\n";
    return 2;
  }
  const std::vector<std::string> rest(argv + 2, argv + argc);
  for (const std::string& a : rest) {
    if (a == "--") break;  // what follows belongs to another command
    if (a == "--help" || a == "-h") {
      std::cout << Help(*command);
      return 0;
    }
  }
  const absl::Status status = RunCommand(*command, rest);
  if (!status.ok()) {
    std::cerr << "packed-bert " << name << ": error: " << Printable(status.message()) << "\n";
    return ExitCodeFor(status);
  }
  return 0;
}

}  // namespace pbert::app
