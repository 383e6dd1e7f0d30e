// Rendering built tables: GitHub Markdown, LaTeX (booktabs), CSV; plus the number
// formatting and LaTeX escaping they share with the table builder.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "report/report.hpp"

namespace runner::report {
namespace {

constexpr std::string_view kFloatConversions = "fFeEgGaA";
constexpr std::string_view kIntegerConversions = "di";
constexpr std::string_view kFlagsWidthPrecision = "-+ #0123456789.";
constexpr std::size_t kMaxFormatWidth = 64;

// Positions of the conversion characters of a printf format ("%%" is text).
std::vector<std::size_t> conversion_positions(const std::string& format) {
  std::vector<std::size_t> positions;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') continue;
    if (i + 1 < format.size() && format[i + 1] == '%') {
      ++i;
      continue;
    }
    i = std::min(format.find_first_not_of(kFlagsWidthPrecision, i + 1), format.size());
    positions.push_back(i);
  }
  return positions;
}

std::string printf_to_string(const char* format, auto value) {
  const int length = std::snprintf(nullptr, 0, format, value);
  if (length < 0) throw std::runtime_error(std::string("bad number format '") + format + "'");
  std::string out(static_cast<std::size_t>(length) + 1, '\0');
  std::snprintf(out.data(), out.size(), format, value);
  out.resize(static_cast<std::size_t>(length));
  return out;
}

std::string markdown_cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '\n' || c == '\r') out += ' ';
    else out += c;
  }
  return out;
}

// Inside *...*: escape what would end or nest the emphasis.
std::string markdown_emphasis(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '*' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csv_line(const std::vector<std::string>& fields) {
  std::string out;
  for (std::size_t i = 0; i < fields.size(); ++i) out += (i ? "," : "") + csv_field(fields[i]);
  return out + "\n";
}

}  // namespace

void check_number_format(const std::string& format) {
  const std::vector<std::size_t> positions = conversion_positions(format);
  if (positions.size() != 1)
    throw std::runtime_error("format '" + format +
                             "' needs exactly one number conversion such as %.2f (use %% for %)");
  const char conversion = positions[0] < format.size() ? format[positions[0]] : '\0';
  if (conversion == '\0' || (kFloatConversions.find(conversion) == std::string_view::npos &&
                             kIntegerConversions.find(conversion) == std::string_view::npos))
    throw std::runtime_error("format '" + format +
                             "' needs a number conversion such as %.2f, %.3g, %e or %d");
  // Width and precision are table-cell sized: "%900000000.1f" would write
  // gigabytes per cell.
  const std::size_t spec = format.rfind('%', positions[0]);
  std::size_t number = 0;
  for (std::size_t i = spec + 1; i <= positions[0]; ++i) {
    if (i < positions[0] && format[i] >= '0' && format[i] <= '9') {
      number = std::min<std::size_t>(number * 10 + static_cast<std::size_t>(format[i] - '0'), 1000000);
      continue;
    }
    if (number > kMaxFormatWidth)
      throw std::runtime_error("format '" + format + "': width or precision " +
                               (number == 1000000 ? std::string("of a million or more") : std::to_string(number)) +
                               " is more than " + std::to_string(kMaxFormatWidth) + "; a cell needs a few digits");
    number = 0;
  }
}

std::string format_number(double value, const std::string& format) {
  check_number_format(format);  // printf with a wrong conversion is undefined behaviour
  const std::size_t at = conversion_positions(format)[0];
  if (kIntegerConversions.find(format[at]) == std::string_view::npos)
    return printf_to_string(format.c_str(), value);
  if (!std::isfinite(value)) return shortest_number(value);
  std::string wide = format;
  wide.insert(at, "ll");  // %d takes the rounded value as long long
  return printf_to_string(wide.c_str(), static_cast<long long>(std::llround(value)));
}

std::string shortest_number(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

std::string latex_escape(const std::string& text) {
  // UTF-8 sequences first (they are several bytes), then single ASCII characters.
  static const std::pair<std::string, std::string> kUtf8[] = {
      {"±", "$\\pm$"}, {"×", "$\\times$"}, {"†", "\\textsuperscript{\\dag}"}, {"–", "--"}, {"—", "---"}};
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    bool replaced = false;
    for (const auto& [from, to] : kUtf8)
      if (text.compare(i, from.size(), from) == 0) {
        out += to;
        i += from.size();
        replaced = true;
        break;
      }
    if (replaced) continue;
    const char c = text[i++];
    switch (c) {
      case '\\': out += "\\textbackslash{}"; break;
      case '~': out += "\\textasciitilde{}"; break;
      case '^': out += "\\textasciicircum{}"; break;
      case '<': out += "\\textless{}"; break;
      case '>': out += "\\textgreater{}"; break;
      case '|': out += "\\textbar{}"; break;
      case '&': case '%': case '$': case '#': case '_': case '{': case '}':
        out += '\\';
        out += c;
        break;
      default: out += c;
    }
  }
  return out;
}

std::string to_markdown(const BuiltTable& table) {
  std::string out = "## " + table.title + "\n\n|";
  for (const auto& header : table.header) out += " " + markdown_cell(header) + " |";
  out += "\n|";
  for (std::size_t c = 0; c < table.header.size(); ++c)
    out += c < table.row_key_columns ? "---|" : "---:|";
  out += "\n";
  for (std::size_t r = 0; r < table.cells.size(); ++r) {
    out += "|";
    for (std::size_t c = 0; c < table.cells[r].size(); ++c) {
      const auto link = table.links.find({r, c});
      const std::string text = markdown_cell(table.cells[r][c]);
      out += " " + (link == table.links.end() ? text : "[" + text + "](" + link->second + ")") + " |";
    }
    out += "\n";
  }
  if (!table.caption.empty()) out += "\n*" + markdown_emphasis(table.caption) + "*\n";
  return out;
}

std::string to_latex(const BuiltTable& table, const std::string& report_id) {
  std::string caption = table.title;
  if (!table.caption.empty()) {
    const char last = caption.empty() ? '.' : caption.back();
    if (!caption.empty()) caption += (last == '.' || last == '?' || last == '!') ? " " : ". ";
    caption += table.caption;
  }
  std::string columns;
  for (std::size_t c = 0; c < table.header.size(); ++c) columns += c < table.row_key_columns ? 'l' : 'r';

  const auto row_line = [](const std::vector<std::string>& cells) {
    std::string line;
    for (std::size_t c = 0; c < cells.size(); ++c) line += (c ? " & " : "") + latex_escape(cells[c]);
    return line + " \\\\\n";
  };
  // A document that prints a table shared by several reports once defines
  // \runnerskip@<report>:<table> for the other copies (reports/writeup.tex does).
  std::string out = "\\ifcsname runnerskip@" + report_id + ":" + table.name + "\\endcsname\\else\n";
  out += "\\begin{table}[ht]\\centering\n";
  out += "\\caption{" + latex_escape(caption) + "}\n";
  out += "\\label{tab:" + report_id + ":" + table.name + "}\n";
  out += "\\begin{tabular}{" + columns + "}\n\\toprule\n";
  out += row_line(table.header) + "\\midrule\n";
  for (const auto& row : table.cells) out += row_line(row);
  out += "\\bottomrule\n\\end{tabular}\n\\end{table}\n\\fi\n";
  return out;
}

std::string to_csv(const BuiltTable& table) {
  std::string out = csv_line(table.csv_header);
  for (const auto& row : table.csv_rows) out += csv_line(row);
  return out;
}

}  // namespace runner::report
