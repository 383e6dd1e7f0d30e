// Text from a user's file, a plugin or a record, made safe to print on one
// terminal line: control characters (NUL, which would cut a message short; ESC,
// which starts sequences that retitle the window or clear the screen; newlines)
// and the C1 controls U+0080..U+009F become visible escapes (\0, \x1b, \n).
#pragma once
#include <cstdio>
#include <string>

namespace runner {

// keep_newlines: for multi-line output (stderr lines end in one).
inline std::string printable(const std::string& text, bool keep_newlines = false) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const bool c1 = c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(text[i + 1]) <= 0x9F;
    if ((c == '\n' && keep_newlines) || (c >= 0x20 && c != 0x7F && !c1)) {
      out += static_cast<char>(c);
      continue;
    }
    if (c == 0) {
      out += "\\0";
      continue;
    }
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    char escape[8];
    std::snprintf(escape, sizeof escape, "\\x%02x", c1 ? static_cast<unsigned char>(text[++i]) : c);
    out += c1 ? std::string("\\u00") + (escape + 2) : std::string(escape);
  }
  return out;
}

}  // namespace runner
