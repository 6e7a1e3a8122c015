"""The bar for recipes/tweets.yaml: TF-IDF + logistic regression on prepare_tweets.py's split.

Each feature set's C is chosen by stratified cross-validation (3 folds by default) on the
TRAIN split only (the TF-IDF vocabulary refitted inside every fold); the test split is read once, by
the chosen model. Needs scikit-learn (`pip install scikit-learn`; not a tfaccel dependency).

    python benchmarks/real_data/prepare_tweets.py
    python benchmarks/real_data/baseline_tweets.py
"""

import argparse
import json
import os
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shared import DEFAULT_OUT, read_tweets_split

C_GRID = [1.0, 3.0, 10.0, 30.0]


def features(name: str):
    """The TF-IDF vectorizer (or union of them) called `name`.

    Args:
        name: ``"word"`` (1-2 grams), ``"char"`` (2-5 grams within words) or ``"word+char"``.

    Returns:
        An unfitted scikit-learn transformer.
    """
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import FeatureUnion

    # sublinear_tf: a word repeated in a tweet counts log-wise, not linearly.
    word = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1)
    char = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True,
                           min_df=2)
    return {"word": word, "char": char,
            "word+char": FeatureUnion([("word", word), ("char", char)])}[name]


def evaluate(name: str, train, test, folds: int) -> dict:
    """Tunes C by cross-validation on `train`, then measures the chosen model on `test`.

    Args:
        name: The feature set (see `features`).
        train: ``(texts, labels)`` of the training split.
        test: ``(texts, labels)`` of the test split.
        folds: Stratified cross-validation folds (seeded).

    Returns:
        The feature set, the chosen C, its mean cross-validation accuracy, the test accuracy.
    """
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    texts, labels = np.asarray(train[0], dtype=object), np.asarray(train[1])
    start = time.perf_counter()
    scores = {c: [] for c in C_GRID}
    for fit_idx, score_idx in StratifiedKFold(folds, shuffle=True,
                                              random_state=0).split(texts, labels):
        # The vocabulary and IDF of each fold from its own training part, fitted once for
        # every C (GridSearchCV would refit them per C: the same result, C times the work).
        vectorizer = features(name)
        x_fit = vectorizer.fit_transform(texts[fit_idx])
        x_score = vectorizer.transform(texts[score_idx])
        # Ascending C, each fit starting from the last: the same optimum, fewer iterations.
        model = LogisticRegression(max_iter=2000, warm_start=True)
        for c in C_GRID:
            model.set_params(C=c).fit(x_fit, labels[fit_idx])
            scores[c].append(model.score(x_score, labels[score_idx]))
    best_c = max(C_GRID, key=lambda c: np.mean(scores[c]))
    vectorizer = features(name)
    model = LogisticRegression(max_iter=2000, C=best_c).fit(
        vectorizer.fit_transform(texts), labels)
    return {"features": name, "C": best_c,
            "cv_accuracy": {c: round(float(np.mean(v)), 4) for c, v in scores.items()},
            "test_accuracy": round(model.score(vectorizer.transform(test[0]), test[1]), 4),
            "seconds": round(time.perf_counter() - start, 1)}


def main() -> None:
    """Prints the majority rate and one JSON line per feature set, then the best by CV."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.path.join(DEFAULT_OUT, "tweets"),
                        help="folder of train.tsv and test.tsv (default: %(default)s)")
    parser.add_argument("--features", nargs="+", default=["word", "char"],
                        choices=["word", "char", "word+char"], help="feature sets to try")
    parser.add_argument("--folds", type=int, default=3,
                        help="cross-validation folds on the training split")
    args = parser.parse_args()
    train = read_tweets_split(args.data, "train")
    test = read_tweets_split(args.data, "test")
    majority, count = Counter(train[1]).most_common(1)[0]
    print(f"train {len(train[0])}, test {len(test[0])}; majority class {majority!r}: test "
          f"accuracy {test[1].count(majority) / len(test[1]):.4f} ({count} in train)")
    results = [evaluate(name, train, test, args.folds) for name in args.features]
    for result in results:
        print(json.dumps(result))
    # Chosen on the training split's cross-validation, not on the test accuracy.
    best = max(results, key=lambda r: max(r["cv_accuracy"].values()))
    print(f"bar: {best['features']} (C {best['C']}): test accuracy {best['test_accuracy']}")


if __name__ == "__main__":
    main()
