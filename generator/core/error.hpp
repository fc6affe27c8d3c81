// The exception hierarchy: every error tessera reports derives from tessera::Error.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace tessera {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A caller-supplied value broke a rule; the message names the argument and the rule.
class InvalidArgument : public Error {
 public:
  InvalidArgument(const std::string& argument, const std::string& rule)
      : Error(argument + ": " + rule), argument_(argument) {}
  const std::string& argument() const { return argument_; }

 private:
  std::string argument_;
};

// Throws InvalidArgument: for argument checks written as one rule a line.
[[noreturn]] inline void fail_argument(const std::string& argument, const std::string& rule) {
  throw InvalidArgument(argument, rule);
}

// A Config that cannot implement a problem on a target; states the violated rule.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// Expression text a user wrote (an epilogue, a score modifier) that does not parse: the argument, the column and
// the text with a caret under it.
class ExprTextError : public Error {
 public:
  ExprTextError(const std::string& argument, const std::string& text, std::size_t column, const std::string& what)
      : Error(argument + ": column " + std::to_string(column) + ": " + what + "\n  " + text + "\n  " +
              std::string(column > 0 ? column - 1 : 0, ' ') + "^"),
        column_(column) {}
  std::size_t column() const { return column_; }

 private:
  std::size_t column_;
};

class EpilogueError : public ExprTextError {
 public:
  EpilogueError(const std::string& text, std::size_t column, const std::string& what)
      : ExprTextError("epilogue", text, column, what) {}
};

// A back-end compiler rejected generated code (a tessera bug, or an unsupported host).
class CompileError : public Error {
 public:
  using Error::Error;
};

// A target or device that cannot be used here; the message says why.
class Unavailable : public Error {
 public:
  using Error::Error;
};

}  // namespace tessera
