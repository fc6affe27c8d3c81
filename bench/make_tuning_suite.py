#!/usr/bin/env python3
"""Writes bench/suites/tuning.txt: the shapes the cost model is trained and evaluated on, in families (LLM
projections at tokens 1..8192, square, skinny, odd and prime sizes, tall/wide rectangles, small batched), each
shape at most ~1.1 GFLOP so that an exhaustive sweep of the CPU variant space stays within minutes."""
import random

CAP = 1.1e9
random.seed(2026)
families = {}
# Families timed with B evicted from the caches before each call: a skinny GEMM streams weights (1-16 MB here)
# that a model too large for the caches brings from memory; left in the shared L3 between calls, their times varied
# with page placement and the neighbours' traffic (the best variant of one run 13% slower in the next, on average).
# A family is (name, B cold); skinny has a warm part too, B of 8-9 MB left in L3 between calls (an MLP's weights
# applied to a few rows again and again): with skinny only cold, every few-row problem with B beyond L2 the model
# learned from was cold, and the warm ones of the LLM family (held out) got cold-B configurations.
COLD_B = {"skinny"}

def add(family, m, n, k, batch=1, cold=None, layouts=""):
    key = (family, family in COLD_B if cold is None else cold, layouts)
    if 2 * m * n * k * batch <= CAP:
        families.setdefault(key, [])
        if (m, n, k, batch) not in families[key]:
            families[key].append((m, n, k, batch))

# LLM projections: tokens × (out, in) for small transformer widths (QKV, MLP up/down, output).
for tokens in [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]:
    for n, k in [(256, 256), (768, 256), (256, 768), (512, 512), (1536, 512), (512, 1536), (1024, 1024)]:
        add("llm", tokens, n, k)
for tokens in [3, 6, 12, 24, 48, 96, 192, 384, 768, 1536, 3072, 6144]:
    for n, k in [(384, 384), (1152, 384), (384, 1152), (640, 640), (2048, 512), (512, 2048)]:
        add("llm", tokens, n, k)
# Decoding at 1-32 tokens streams each layer's weights from memory: the LLM projections whose weights outgrow L2,
# timed cold as well, so that the skinny family is not the only one with a cold B (held out, it left the model
# with no cold example at all: 12x3072x1024 cold picked a warm-B tile 96% slower than the best).
for tokens in [1, 2, 4, 8, 16, 32]:
    for n, k in [(1024, 1024), (2048, 512), (512, 2048), (1536, 512)]:
        add("llm", tokens, n, k, cold=True)
for size in [16, 24, 32, 40, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 576, 640, 704, 768]:
    add("square", size, size, size)
for m in [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32]:
    for n, k in [(4096, 1024), (1024, 4096), (2048, 2048), (8192, 512)]:
        add("skinny", m, n, k)
for m in [1, 2, 3, 4, 6, 7, 9, 12, 16, 20]:
    for n, k in [(3072, 1024), (1024, 3072), (6144, 768), (1536, 1536)]:
        add("skinny", m, n, k)
for m in [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]:
    for n, k in [(2048, 1024), (1024, 2048), (4096, 512), (512, 4096), (1536, 1536)]:
        add("skinny", m, n, k, cold=False)
primes = [3, 7, 13, 17, 31, 37, 61, 67, 97, 101, 127, 131, 193, 251, 257, 383, 509, 521, 769, 1021]
while len(families.get(("odd", False, ""), [])) < 120:
    add("odd", random.choice(primes), random.choice(primes), random.choice(primes))
for long, short, k in [(4096, 64, 256), (2048, 128, 512), (8192, 32, 512), (1024, 256, 1024), (4096, 16, 1024),
                       (2048, 48, 2048), (8192, 96, 256), (1536, 192, 768), (3072, 80, 1024), (6144, 24, 2048)]:
    add("rectangular", long, short, k)
    add("rectangular", short, long, k)
    add("rectangular", long, short, short)
    add("rectangular", short, long, short)
for size, batch in [(8, 512), (16, 256), (16, 64), (24, 128), (32, 64), (32, 16), (48, 32), (64, 16), (64, 4),
                    (12, 256), (20, 100), (40, 40), (56, 20),
                    # the batches of bench/suites/small.txt (LIBXSMM's ground), added 2026-11-26
                    (16, 1024), (32, 256), (64, 64)]:
    add("small", size, size, size, batch)
    add("small", size, size // 2, size * 2, batch)
# Column-major operands (added 2026-11-26): with rr records only, the model ranked the other layouts from features it
# had never seen varied (777x333x555 A·Bᵀ: its pick 135 GFLOP/s, the best of the space 155). The linear family is
# x·Wᵀ with W stored out × in, as a Linear layer keeps it (B column-major); the layouts families cover each pair on
# square, odd, rectangular and small batched shapes.
for tokens in [1, 4, 16, 64, 256, 1024]:
    for n, k in [(768, 256), (512, 512), (1536, 512), (512, 1536), (1024, 1024)]:
        add("linear", tokens, n, k, layouts=" b-col")
for pair in [" b-col", " a-col", " a-col b-col"]:
    for m, n, k, batch in [(64, 64, 64, 1), (128, 128, 128, 1), (192, 192, 192, 1), (256, 256, 256, 1),
                           (384, 384, 384, 1), (512, 512, 512, 1), (640, 640, 640, 1), (777, 333, 555, 1),
                           (101, 257, 509, 1), (509, 131, 383, 1), (128, 1024, 1024, 1), (1024, 128, 1024, 1),
                           (2048, 64, 512, 1), (32, 32, 32, 64), (64, 64, 64, 16), (16, 16, 16, 256)]:
        add("layouts-" + {" b-col": "rc", " a-col": "cr", " a-col b-col": "cc"}[pair], m, n, k, batch, layouts=pair)
# More of each (the 16 above left the model a few picks 7-19% slower than the rr-trained one's on shapes it had
# not seen): random sizes, and more token counts for x·Wᵀ.
for tokens in [2, 8, 32, 128, 512]:
    for n, k in [(768, 256), (512, 512), (1536, 512), (512, 1536), (1024, 1024)]:
        add("linear", tokens, n, k, layouts=" b-col")
sizes = [48, 80, 112, 176, 240, 288, 352, 416, 480, 544, 608, 720, 832, 960]
for pair in [" b-col", " a-col", " a-col b-col"]:
    family = "layouts-" + {" b-col": "rc", " a-col": "cr", " a-col b-col": "cc"}[pair]
    while len(families[(family, False, pair)]) < 32:
        add(family, random.choice(sizes), random.choice(sizes), random.choice(sizes), layouts=pair)
# Few rows of a column-major A (the rc ones are the linear family): the model trained without them picked in-place
# A tiles for 48x2048x512 Aᵀ·B, 0.84 of the rr-trained model's pick, and 0.56 at 12x4096x1024 Aᵀ·Bᵀ.
for pair in [" a-col", " a-col b-col"]:
    for m in [2, 4, 12, 24, 48, 96]:  # (one row of a column-major A is a row-major one)
        for n, k in [(1024, 1024), (2048, 512), (512, 2048)]:
            add("layouts-" + {" a-col": "cr", " a-col b-col": "cc"}[pair], m, n, k, layouts=pair)

# The small family's L3-sized batches in the other layouts (added 2026-11-26, with the fixed-size kernels of A·Bᵀ):
# the three above fit in L2, and the model ranked 32³×256 Aᵀ·B's tiles from them (its pick 102 GFLOP/s, the best 116).
for pair in [" b-col", " a-col", " a-col b-col"]:
    for size, batch in [(16, 1024), (32, 256), (64, 64)]:
        add("layouts-" + {" b-col": "rc", " a-col": "cr", " a-col b-col": "cc"}[pair], size, size, size, batch,
            layouts=pair)

with open("bench/suites/tuning.txt", "w") as out:
    out.write("# The cost model's ground truth (bench/make_tuning_suite.py): %d shapes in %d families\n"
              % (sum(len(v) for v in families.values()), len({f for f, _, _ in families})))
    for (family, cold, layouts), shapes in families.items():
        out.write("# family: %s%s%s\n" % (family, " b-cold" if cold else "", layouts))
        for m, n, k, batch in shapes:
            out.write("%d %d %d%s\n" % (m, n, k, "" if batch == 1 else " %d" % batch))
# Every third shape of each family, measured a second time: the noise floor of a top-1 regret
# (`tessera model eval --retest`).
with open("bench/suites/tuning_retest.txt", "w") as out:
    out.write("# Every third shape of bench/suites/tuning.txt, measured again for the noise floor "
              "(bench/make_tuning_suite.py)\n")
    for (family, cold, layouts), shapes in families.items():
        out.write("# family: %s%s%s\n" % (family, " b-cold" if cold else "", layouts))
        for m, n, k, batch in shapes[::3]:
            out.write("%d %d %d%s\n" % (m, n, k, "" if batch == 1 else " %d" % batch))
print({"%s%s%s" % (f, " b-cold" if c else "", l): len(v) for (f, c, l), v in families.items()},
      sum(len(v) for v in families.values()))
