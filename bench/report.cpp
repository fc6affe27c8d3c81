#include "bench/report.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>
#include "generator/core/error.hpp"

namespace tessera::bench {

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model, family;
  while (std::getline(in, line)) {
    const auto value = [&] { return line.substr(line.find(':') + 2); };
    if (model.empty() && line.rfind("model name", 0) == 0) model = value();
    if (family.empty() && line.rfind("cpu family", 0) == 0) family = value();
  }
  return model + " (family " + family + ")";
}

const PeerResult* find(const ShapeResult& r, const std::string& peer) {
  for (const auto& p : r.results)
    if (p.peer == peer) return &p;
  return nullptr;
}

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '<')
      out += "&lt;";
    else if (ch == '>')
      out += "&gt;";
    else if (ch == '&')
      out += "&amp;";
    else
      out += ch;
  }
  return out;
}

}  // namespace

std::string table_header(const std::vector<std::string>& peers) {
  std::string h = fmt::format("{:<20} {:>3} {:>9}", "shape", "thr", "tessera");
  for (const auto& p : peers) h += fmt::format(" {:>9}", p);
  return h + fmt::format(" {:>7}  {:<9} {:>7}", "ratio", "best peer", "paired");
}

std::string table_row(const ShapeResult& r, const std::vector<std::string>& peers) {
  std::string row = fmt::format("{:<20} {:>3} {:>9.1f}", r.shape.label(), r.threads, r.results[0].median_gflops);
  for (const auto& name : peers) {
    const PeerResult* p = find(r, name);
    if (!p || !p->unavailable.empty())
      row += fmt::format(" {:>9}", "-");
    else
      row += fmt::format(" {:>8.1f}{}", p->median_gflops, p->agrees ? " " : "!");
  }
  return row + fmt::format(" {:>7.2f}  {:<9} {:>7.2f}", r.ratio, r.best_peer, r.paired_ratio);
}

nlohmann::json summary(const std::vector<ShapeResult>& results) {
  std::map<std::string, std::vector<const ShapeResult*>> groups;
  for (const auto& r : results) {
    if (r.ratio <= 0) continue;
    groups["threads_" + std::to_string(r.threads)].push_back(&r);
    groups["all"].push_back(&r);
  }
  const auto geomean = [](const std::vector<double>& v) {
    double log_sum = 0;
    for (double x : v) log_sum += std::log(x);
    return std::exp(log_sum / static_cast<double>(v.size()));
  };
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, rows] : groups) {
    std::vector<double> ratio, paired;
    for (const ShapeResult* r : rows) {
      ratio.push_back(r->ratio);
      paired.push_back(r->paired_ratio);
    }
    j[key] = {{"geomean_ratio", geomean(ratio)},
              {"min_ratio", *std::min_element(ratio.begin(), ratio.end())},
              {"geomean_paired_ratio", geomean(paired)},
              {"min_paired_ratio", *std::min_element(paired.begin(), paired.end())},
              {"shapes", rows.size()}};
  }
  return j;
}

nlohmann::json to_json(const std::vector<ShapeResult>& results, const std::string& command) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json peers = nlohmann::json::object();
    for (const auto& p : r.results) {
      if (!p.unavailable.empty()) {
        peers[p.peer] = {{"unavailable", p.unavailable}};
        continue;
      }
      peers[p.peer] = {{"median_gflops", p.median_gflops},       {"samples_gflops", p.gflops},
                       {"calls_per_sample", p.calls_per_sample}, {"max_rel_diff_vs_tessera", p.max_rel_diff},
                       {"agrees_with_tessera", p.agrees},        {"details", p.details}};
    }
    rows.push_back({{"shape", r.shape.label()},
                    {"m", r.shape.m},
                    {"n", r.shape.n},
                    {"k", r.shape.k},
                    {"batch", r.shape.batch},
                    {"layouts", r.shape.layouts()},
                    {"inputs", std::string(gemm_inputs_name(r.shape.inputs))},
                    {"threads", r.threads},
                    {"peers", peers},
                    {"best_peer", r.best_peer},
                    {"best_peer_gflops", r.best_peer_gflops},
                    {"ratio_tessera_over_best_peer", r.ratio},
                    {"paired_ratio", r.paired_ratio},
                    {"paired_peer", r.paired_peer}});
  }
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return {{"command", command},
          {"date", date},
          {"machine", {{"cpu", cpu_model()}, {"hardware_threads", std::thread::hardware_concurrency()}}},
          {"tessera_version", TESSERA_VERSION},
          {"summary", summary(results)},
          {"results", rows}};
}

std::string to_svg(const std::vector<ShapeResult>& results, const std::string& title) {
  std::set<int> thread_counts;
  std::vector<std::string> series;
  std::vector<std::string> shapes;
  double top = 1;
  for (const auto& r : results) {
    thread_counts.insert(r.threads);
    if (std::find(shapes.begin(), shapes.end(), r.shape.label()) == shapes.end()) shapes.push_back(r.shape.label());
    for (const auto& p : r.results) {
      if (std::find(series.begin(), series.end(), p.peer) == series.end()) series.push_back(p.peer);
      top = std::max(top, p.median_gflops);
    }
  }
  top = std::ceil(top / 50) * 50;
  const char* colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"};
  const double left = 70, panel = 260, gap = 110;
  const double width = std::max({480.0, 70.0 * static_cast<double>(shapes.size()), 6.5 * title.size() - 160});
  const double height = 60 + static_cast<double>(thread_counts.size()) * (panel + gap);
  std::string svg = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{0}' height='{1}' font-family='sans-serif' font-size='12'>\n"
      "<rect width='{0}' height='{1}' fill='white'/>\n<text x='{2}' y='24' font-size='13'>{3}</text>\n",
      left + width + 160, height, left, escape_xml(title));
  double y0 = 50;
  for (int threads : thread_counts) {
    const auto x_of = [&](std::size_t i) {
      return left + (static_cast<double>(i) + 0.5) * width / static_cast<double>(shapes.size());
    };
    const auto y_of = [&](double g) { return y0 + panel - g / top * panel; };
    svg += fmt::format("<text x='{}' y='{}'>{} thread{} — GFLOP/s</text>\n", left, y0 - 6, threads,
                       threads == 1 ? "" : "s");
    for (int tick = 0; tick <= 5; ++tick) {
      const double g = top * tick / 5;
      svg += fmt::format(
          "<line x1='{}' x2='{}' y1='{:.1f}' y2='{:.1f}' stroke='#ddd'/>"
          "<text x='{}' y='{:.1f}' text-anchor='end'>{:.0f}</text>\n",
          left, left + width, y_of(g), y_of(g), left - 6, y_of(g) + 4, g);
    }
    for (std::size_t i = 0; i < shapes.size(); ++i)
      svg +=
          fmt::format("<text x='{:.1f}' y='{:.1f}' text-anchor='end' transform='rotate(-35 {:.1f} {:.1f})'>{}</text>\n",
                      x_of(i), y0 + panel + 14, x_of(i), y0 + panel + 14, shapes[i]);
    for (std::size_t si = 0; si < series.size(); ++si) {
      std::string points;
      for (std::size_t i = 0; i < shapes.size(); ++i)
        for (const auto& r : results)
          if (r.threads == threads && r.shape.label() == shapes[i])
            if (const PeerResult* p = find(r, series[si]); p && p->unavailable.empty()) {
              points += fmt::format("{:.1f},{:.1f} ", x_of(i), y_of(p->median_gflops));
              svg += fmt::format("<circle cx='{:.1f}' cy='{:.1f}' r='3' fill='{}'/>\n", x_of(i), y_of(p->median_gflops),
                                 colors[si % 7]);
            }
      svg += fmt::format("<polyline points='{}' fill='none' stroke='{}' stroke-width='{}'/>\n", points, colors[si % 7],
                         si == 0 ? 2.5 : 1.5);
    }
    y0 += panel + gap;
  }
  for (std::size_t si = 0; si < series.size(); ++si)
    svg += fmt::format("<rect x='{}' y='{}' width='12' height='12' fill='{}'/><text x='{}' y='{}'>{}</text>\n",
                       left + width + 20, 50 + 20 * si, colors[si % 7], left + width + 38, 60 + 20 * si, series[si]);
  return svg + "</svg>\n";
}

void write_file_atomically(const std::string& path, const std::string& content) {
  const std::string temporary = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << content;
    out.flush();
    if (!out) {
      std::remove(temporary.c_str());
      throw InvalidArgument(path, "cannot write the report");
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw InvalidArgument(path, "cannot move the report into place");
  }
}

}  // namespace tessera::bench
