"""False-positive rate of the privacy detector on benign robot strings.

The corpus (test/privacy_corpus.py: skill names, object classes, zones, numeric ids,
versions, times, coordinates, hashes, UUIDs, topics, IP addresses, integer lists) is
generated deterministically; every string is screened as a note, a target class and a
parameter name. A refused string is a false positive. test/core/test_privacy_fuzz.py
holds the same corpus at zero and fuzzes the other direction (real secrets refused).

    python -m bench.privacy_false_positives [--count N] [--seed S] [--out FILE]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from bench.stats import write_result
from robot_memory.intake.privacy import find_sensitive

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "test"))
from privacy_corpus import benign_robot_strings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out")
    args = parser.parse_args()
    corpus = benign_robot_strings(args.count, args.seed)
    refused = Counter()
    examples = []
    for text in corpus:
        finding = find_sensitive({"notes": text, "target_class": text, "parameters": {text: 1.0}})
        if finding is not None:
            refused[finding.category] += 1
            examples.append(text)
    result = {"corpus_size": len(corpus), "distinct": len(set(corpus)),
              "refused": sum(refused.values()), "by_category": dict(refused),
              "false_positive_rate": sum(refused.values()) / len(corpus),
              "examples_refused": examples[:10], "seed": args.seed}
    path = write_result("privacy_false_positives", result, args.out)
    print(f"{result['refused']} of {len(corpus)} benign strings refused "
          f"(false-positive rate {result['false_positive_rate']:.4%}); written to {path}")


if __name__ == "__main__":
    main()
