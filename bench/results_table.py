#!/usr/bin/env python3
"""Prints the README's markdown tables from tessera-bench JSON results (bench/results/*.json)."""
import json
import sys


def gemm_table(path):
    data = json.load(open(path))
    peers = []
    for row in data["results"]:
        for name in row["peers"]:
            if name != "tessera" and name not in peers:
                peers.append(name)
    lines = ["| shape | thr | tessera | " + " | ".join(peers) + " | tessera / best peer |",
             "|---|---|---|" + "---|" * len(peers) + "---|"]
    for row in data["results"]:
        cells = []
        for name in ["tessera"] + peers:
            p = row["peers"].get(name, {})
            cells.append("–" if "median_gflops" not in p else f"{p['median_gflops']:.1f}")
        ratio = row["ratio_tessera_over_best_peer"]
        lines.append(f"| {row['shape']} | {row['threads']} | " + " | ".join(cells) +
                     f" | **{ratio:.2f}** ({row['best_peer']}) |")
    summary = data["summary"]
    parts = [f"{k}: geomean {v['geomean_ratio']:.2f}, min {v['min_ratio']:.2f}" for k, v in sorted(summary.items())]
    lines.append("")
    lines.append("Summary (tessera / best peer): " + "; ".join(parts) + ".")
    return "\n".join(lines)


def fusion_table(path):
    rows = json.load(open(path))
    lines = ["| shape | thr | tessera plain ms | tessera fused ms | fused / plain | tessera + separate pass / fused |"
             " oneDNN fused ms | oneDNN split ms |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['shape']} | {r['threads']} | {r['tessera_ms']:.3f} | {r['tessera+gelu_ms']:.3f} | "
                     f"**{r['fused_over_plain']:.3f}** | {r['tessera_then_pass_over_fused']:.3f} | "
                     f"{r['onednn+gelu_ms']:.3f} | {r['onednn,gelu_ms']:.3f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(f"<!-- {path} -->")
        print(fusion_table(path) if path.endswith("fusion.json") else gemm_table(path))
        print()
