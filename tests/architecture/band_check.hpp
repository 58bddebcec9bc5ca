#pragma once
// The layering rule of docs/ARCHITECTURE.md as a check: the band table is parsed from the
// doc itself (so the doc and the check cannot disagree), every library file is mapped to a
// row, and each `#include "fucina/..."` must name the file's own row or a lower band.
// Also Note [Arch macros] (kernels/arch.hpp): only that header reads the compiler's ISA
// macros; everyone else tests FUCINA_ARCH_* after including it.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace fucina::test::bands {

// One path of a band row: a folder ("core/raw/") or a file ("core/tensor.hpp"), relative
// to include/fucina (and to src/ for the implementation files). The paths of one row are
// one layer and include each other freely; rows that share a band do not.
struct Entry {
  std::string path;
  int band = 0;
  int row = 0;           // index of its table row
  bool planned = false;  // row marked "(planned)": its paths need not exist yet
  bool is_folder() const { return !path.empty() && path.back() == '/'; }
};

struct Table {
  std::vector<Entry> entries;
  // The most specific entry for a module-relative path, or nullptr.
  const Entry* find(std::string_view rel) const {
    const Entry* best = nullptr;
    for (const Entry& e : entries) {
      const bool hit = e.is_folder() ? rel.starts_with(e.path) : rel == e.path;
      if (hit && (best == nullptr || e.path.size() > best->path.size())) best = &e;
    }
    return best;
  }
  int top_band() const {
    int b = -1;
    for (const Entry& e : entries) b = std::max(b, e.band);
    return b;
  }
};

inline std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// Cells of a trimmed table row "| a | b |" -> {"a", "b"}.
inline std::vector<std::string> split_cells(std::string_view row) {
  std::vector<std::string> cells;
  std::string cur;
  for (std::size_t i = 1; i < row.size(); ++i) {  // row[0] is '|'
    if (row[i] == '|') {
      cells.push_back(trim(cur));
      cur.clear();
    } else {
      cur += row[i];
    }
  }
  return cells;
}

// The table under the header row "| band | folder | what lives there |". Throws
// std::runtime_error (with the reason) when it is missing or a row does not parse.
inline Table parse_table(std::string_view markdown) {
  std::istringstream in{std::string(markdown)};
  std::string line;
  bool in_table = false;
  Table t;
  int line_no = 0, n_rows = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string l = trim(line);
    if (!in_table) {
      if (l.starts_with("|")) {
        const auto cells = split_cells(l);
        in_table = cells.size() >= 2 && cells[0] == "band" && cells[1] == "folder";
        if (in_table) std::getline(in, line), ++line_no;  // the | --- | separator
      }
      continue;
    }
    if (!l.starts_with("|")) break;
    const auto cells = split_cells(l);
    const std::string where = "band table line " + std::to_string(line_no) + ": ";
    if (cells.size() < 2) throw std::runtime_error(where + "expected | band | folder | ... |");
    Entry proto;
    proto.row = n_rows++;
    std::string band = cells[0];
    if (band.ends_with("(planned)")) {
      proto.planned = true;
      band = trim(band.substr(0, band.size() - 9));
    }
    if (band.empty() || !std::all_of(band.begin(), band.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
      throw std::runtime_error(where + "band '" + cells[0] + "' is not a number");
    proto.band = std::stoi(band);
    // Paths are the backticked items of the folder cell.
    const std::string& f = cells[1];
    std::size_t n_paths = 0;
    for (std::size_t i = f.find('`'); i != std::string::npos; i = f.find('`', i + 1)) {
      const std::size_t j = f.find('`', i + 1);
      if (j == std::string::npos) throw std::runtime_error(where + "unbalanced backtick in '" + f + "'");
      Entry e = proto;
      e.path = f.substr(i + 1, j - i - 1);
      t.entries.push_back(e);
      ++n_paths;
      i = j;
    }
    if (n_paths == 0) throw std::runtime_error(where + "no `path` in '" + f + "'");
  }
  if (t.entries.empty()) throw std::runtime_error("no '| band | folder |' table found");
  return t;
}

// A library file: `shown` is its repository path (for messages), `rel` its path relative
// to include/fucina or src (what the table maps).
struct SourceFile {
  std::string shown, rel, text;
};

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + p.string());
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// Every .hpp/.cpp under root/include/fucina and root/src, sorted.
inline std::vector<SourceFile> load_tree(const std::filesystem::path& root) {
  std::vector<SourceFile> files;
  for (const char* base : {"include/fucina", "src"}) {
    const std::filesystem::path dir = root / base;
    for (const auto& de : std::filesystem::recursive_directory_iterator(dir)) {
      const auto ext = de.path().extension();
      if (!de.is_regular_file() || (ext != ".hpp" && ext != ".cpp")) continue;
      const std::string rel = std::filesystem::relative(de.path(), dir).generic_string();
      files.push_back({std::string(base) + "/" + rel, rel, read_text(de.path())});
    }
  }
  std::sort(files.begin(), files.end(), [](const SourceFile& a, const SourceFile& b) { return a.shown < b.shown; });
  return files;
}

// Calls f(line_no, line) for each line of text.
template <class F>
void for_each_line(std::string_view text, F&& f) {
  int n = 0;
  while (!text.empty()) {
    const std::size_t e = text.find('\n');
    f(++n, text.substr(0, e));
    if (e == std::string_view::npos) break;
    text.remove_prefix(e + 1);
  }
}

// One message per broken rule, each naming the file (and line, and include).
inline std::vector<std::string> check_layering(const Table& t, const std::vector<SourceFile>& files) {
  std::vector<std::string> bad;
  auto row = [](const Entry& e) { return "band " + std::to_string(e.band) + " (" + e.path + ")"; };
  for (const SourceFile& f : files) {
    const Entry* own = t.find(f.rel);
    if (own == nullptr) {
      bad.push_back(f.shown + ": not in the band table of docs/ARCHITECTURE.md (add its folder to a band)");
      continue;
    }
    for_each_line(f.text, [&](int n, std::string_view line) {
      const std::string l = trim(line);
      constexpr std::string_view kInc = "#include \"fucina/";
      if (!l.starts_with(kInc)) return;
      const std::size_t end = l.find('"', kInc.size());
      if (end == std::string::npos) return;
      const std::string target = l.substr(kInc.size(), end - kInc.size());
      const Entry* to = t.find(target);
      if (to == nullptr) {
        bad.push_back(f.shown + ":" + std::to_string(n) + ": includes fucina/" + target +
                      ", which is in no band of docs/ARCHITECTURE.md");
      } else if (to->row != own->row && to->band >= own->band) {
        bad.push_back(f.shown + ":" + std::to_string(n) + ": includes fucina/" + target + " of " + row(*to) +
                      " from " + row(*own) + "; a file may include its own row and lower bands only");
      }
    });
  }
  return bad;
}

// Table paths that name nothing in the tree (a map of what does not exist), unless planned.
inline std::vector<std::string> check_entries_exist(const Table& t, const std::vector<SourceFile>& files) {
  std::vector<std::string> bad;
  for (const Entry& e : t.entries) {
    if (e.planned) continue;
    const bool exists = std::any_of(files.begin(), files.end(), [&](const SourceFile& f) {
      return e.is_folder() ? f.rel.starts_with(e.path) : f.rel == e.path;
    });
    if (!exists) bad.push_back("docs/ARCHITECTURE.md: band " + std::to_string(e.band) + " lists " + e.path +
                               ", which is not in include/fucina or src");
  }
  return bad;
}

// Note [Arch macros]: only kernels/arch.hpp tests the compiler's ISA macros, and a file
// that tests FUCINA_ARCH_* includes it (an unset FUCINA_ARCH_X would read as 0 silently).
inline std::vector<std::string> check_arch_macros(const std::vector<SourceFile>& files) {
  static constexpr std::string_view kIsa[] = {"__AVX", "__FMA__", "__F16C__", "__ARM_NEON", "__SSE",
                                              "__GFNI__", "FUCINA_SCALAR"};
  std::vector<std::string> bad;
  for (const SourceFile& f : files) {
    if (f.rel == "kernels/arch.hpp") continue;
    const bool includes_arch = f.text.find("#include \"fucina/kernels/arch.hpp\"") != std::string::npos;
    for_each_line(f.text, [&](int n, std::string_view line) {
      const std::string l = trim(line);
      if (!l.starts_with("#if") && !l.starts_with("#elif")) return;
      for (std::string_view m : kIsa)
        for (std::size_t at = l.find(m); at != std::string::npos; at = l.find(m, at + 1)) {
          std::size_t end = at;
          while (end < l.size() && (std::isalnum(static_cast<unsigned char>(l[end])) || l[end] == '_')) ++end;
          bad.push_back(f.shown + ":" + std::to_string(n) + ": tests " + l.substr(at, end - at) +
                        "; ask kernels/arch.hpp (FUCINA_ARCH_*) instead");
        }
      if (l.find("FUCINA_ARCH_") != std::string::npos && !includes_arch)
        bad.push_back(f.shown + ":" + std::to_string(n) + ": tests FUCINA_ARCH_* without including fucina/kernels/arch.hpp");
    });
  }
  return bad;
}

}  // namespace fucina::test::bands
