// Aligned text tables for humans (the `table` format of kcheckpoint, kdlq,
// klag): like kafka-consumer-groups --describe, numbers right-aligned.
#pragma once

#include <string>
#include <vector>

namespace kpipe {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  // Columns whose cells are numbers (or "-") are right-aligned.
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }
  std::string render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace kpipe
