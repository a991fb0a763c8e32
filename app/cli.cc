#include "app/cli.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <new>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/folders.h"

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
    case absl::StatusCode::kDataLoss:  // a damaged input file
    case absl::StatusCode::kPermissionDenied:  // a path the user may not write or read
      return 2;
    default:
      return 1;
  }
}

std::string CommandLine::Help() const {
  std::string text =
      "packed-bert: BERT pretraining on packed sequences\n\n"
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
    absl::StrAppend(&text, absl::StrFormat("  %-28s %s%s\n", left, f.help,
                                           f.required ? " (required)" : ""));
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
      return absl::InvalidArgumentError(absl::StrCat(command.name, " needs --", f.name, " ",
                                                     f.value_name, hint));
    }
  }
  return args;
}

int CommandLine::Run(int argc, char** argv) const {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
      std::string(argv[1]) == "help") {
    std::cout << Help();
    return argc < 2 ? 2 : 0;
  }
  std::string name = argv[1];
  const Command* command = nullptr;
  for (const Command& c : commands_) {
    if (c.name == name) command = &c;
  }
  if (command == nullptr) {
    std::cerr << "packed-bert: unknown command '" << name << "'; see 'packed-bert --help'\n";
    return 2;
  }
  std::vector<std::string> rest(argv + 2, argv + argc);
  for (const std::string& a : rest) {
    if (a == "--") break;  // what follows belongs to another command
    if (a == "--help" || a == "-h") {
      std::cout << Help(*command);
      return 0;
    }
  }
  absl::StatusOr<Args> args = Parse(*command, rest);
  absl::Status status;
  try {
    status = args.ok() ? command->run(*args) : args.status();
  } catch (const std::bad_alloc&) {
    status = absl::ResourceExhaustedError(
        name == "train" || name == "score"
            ? "out of memory; use smaller batches (train.micro_batch_rows) or a smaller model"
            : "out of memory; give the process more memory (ulimit -v, the container's limit)");
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the system refused (no permission, a loop of symbolic links):
    // the user's to fix, and named.
    const std::string path = e.path1().empty() ? "a path" : e.path1().string();
    status = absl::InvalidArgumentError(absl::StrCat(
        path, ": ", e.code().message(), "; check the path and its permissions"));
  } catch (const std::exception& e) {
    // LibTorch (c10::Error), HDF5 and the standard library report by
    // exception; the first line of the message is the one that says what.
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    status = absl::InternalError(absl::StrCat("unexpected failure: ", what,
                                              " (please report it with the command line)"));
  } catch (...) {
    status = absl::InternalError(
        "unexpected failure of an unknown kind (please report it with the command line)");
  }
  // What a command printed is its result: if it could not all be written
  // (a full disk, /dev/full, a closed pipe), the command failed.
  if (status.ok()) {
    std::cout.flush();
    if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
      const int error = errno;
      status = absl::UnavailableError(absl::StrCat(
          "the result could not be written to standard output (", std::strerror(error),
          "); it is lost: run the command again with its output going where there is room"));
    }
  }
  if (!status.ok()) {
    std::cerr << "packed-bert " << name << ": error: " << status.message() << "\n";
    return ExitCodeFor(status);
  }
  return 0;
}

}  // namespace pbert::app
