"""THE reading of a text file on the Python side: compression, encoding, byte-order mark, truncation, emptiness, each named."""

from __future__ import annotations

import codecs
import contextlib
import gzip
import io
import os
import zlib
from typing import Iterator, Optional

from tfaccel.errors import DataError, UserInputError

COMPRESSIONS = ("GZIP", "ZLIB")
# A file's compression when none is declared: by its extension (TensorFlow's readers
# take "GZIP" or "ZLIB"; a zlib stream has no common extension but these two).
_BY_EXTENSION = {".gz": "GZIP", ".gzip": "GZIP", ".zz": "ZLIB", ".zlib": "ZLIB"}
BOM = "\ufeff"
# Compressed files read whole to their end marker in this process, by (path, size, mtime):
# a source that builds twice (training, then its plain pass or label pass) inflates once.
_COMPLETE: set = set()


class NotText(DataError):
    """A file that does not decode with the encoding asked for (a source may skip it)."""


def compression_of(path, declared: Optional[str] = None) -> Optional[str]:
    """The file's compression: `declared` ("GZIP", "ZLIB") if given, else by its extension.

    Returns:
        "GZIP", "ZLIB" or None (uncompressed).
    """
    if declared:
        return declared
    return _BY_EXTENSION.get(os.path.splitext(os.fspath(path))[1].lower())


def _open_binary(path: str):
    if "://" in path:  # gs://, hdfs://...: TensorFlow's file system
        # Deferred: TensorFlow (seconds); this module reads local files TF-free (validate).
        import tensorflow as tf

        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")


def read_bytes(path, *, compression: Optional[str] = None, what: str = "Text file") -> bytes:
    """The whole file, decompressed.

    Raises:
        DataError: The file cannot be read, is not valid `compression` data, or is cut
            short (its compressed stream ends before its end marker), the file named.
    """
    path = os.fspath(path)
    try:
        with _open_binary(path) as f:
            raw = f.read()
    except OSError as err:
        raise DataError(f"{what} {path!r} cannot be read: {err}") from None
    if compression is None:
        return raw
    try:
        if compression == "GZIP":
            data = gzip.decompress(raw)
        else:
            stream = zlib.decompressobj()
            data = stream.decompress(raw)
            if not stream.eof:
                raise EOFError
        _COMPLETE.add(_identity(path))
        return data
    except EOFError:
        raise DataError(
            f"{what} {path!r} is cut short: its {compression} stream ends before its end "
            f"marker ({len(raw)} bytes on disk), so its last lines are missing. Copy or "
            "write the file again.") from None
    except (OSError, zlib.error) as err:
        raise DataError(f"{what} {path!r} is not valid {compression} data ({err}); check "
                        "the compression declared for it.") from None


def _identity(path: str) -> tuple:
    """A file as it is now: (path, size, modification time); a rewrite is another file."""
    try:
        stat = os.stat(path)
    except OSError:  # a remote file (gs://): its path alone, checked once per process
        return (path, None, None)
    return (path, stat.st_size, stat.st_mtime_ns)


def check_complete(path, *, compression: Optional[str], what: str = "Text file") -> None:
    """Checks that a compressed file's stream reaches its end marker, keeping nothing.

    TensorFlow's readers stop silently where a GZIP or ZLIB stream is cut short
    (`tf.data.TextLineDataset` yields the lines before the cut and no error; CsvDataset
    fails only if the cut falls inside a row), so a source that skips the full up-front
    read (``verify=False``) still runs this: the file is inflated once and the output
    thrown away, at zlib's speed. Uncompressed files need nothing.

    Raises:
        DataError: The stream is cut short or corrupt, the file named (`read_bytes`).
    """
    if compression is None:
        return
    path = os.fspath(path)
    identity = _identity(path)
    if identity in _COMPLETE:
        return
    try:
        with _open_binary(path) as raw:
            stream = (gzip.GzipFile(fileobj=raw) if compression == "GZIP"
                      else _ZlibReader(raw))
            while stream.read(1 << 20):
                pass
        _COMPLETE.add(identity)
    except (EOFError, OSError, zlib.error):
        # Read it again whole: read_bytes names the cause in the one wording.
        read_bytes(path, compression=compression, what=what)
        raise


def decode(data: bytes, *, path, encoding: Optional[str] = None, what: str = "Text file",
           takes_encoding: bool = True) -> str:
    """`data` decoded strictly with `encoding` (None: UTF-8), a leading byte-order mark
    dropped (spreadsheet exports write one; it is not part of the first line's text).

    `takes_encoding`: whether the caller has an ``encoding=`` to name in the fix.

    Raises:
        NotText: A byte sequence that does not decode, named with its file and line.
    """
    encoding = encoding or "utf-8"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        fix = ("pass encoding=... with the file's encoding (e.g. 'latin-1' or 'cp1252'), or "
               "re-encode it as UTF-8" if takes_encoding
               else "re-encode it as UTF-8 (e.g. iconv -f latin1 -t utf-8)")
        raise NotText(f"{what} {os.fspath(path)!r} is not {encoding} text: line {line} holds "
                      f"{data[err.start:err.end]!r} ({err.reason}); {fix}.") from None
    return text[1:] if text.startswith(BOM) else text


def read_text(path, *, encoding: Optional[str] = None, compression: Optional[str] = None,
              what: str = "Text file", takes_encoding: bool = True) -> str:
    """The whole file as text: `read_bytes` then `decode` (see both for the errors)."""
    return decode(read_bytes(path, compression=compression, what=what), path=path,
                  encoding=encoding, what=what, takes_encoding=takes_encoding)


def refuse_empty(path, *, what: str = "Text file", needs: str = "one line") -> DataError:
    """THE message of a file with nothing in it (returned, for the caller to raise)."""
    return DataError(f"{what} {os.fspath(path)!r} is empty: it needs "
                     f"at least {needs}. Remove it from the paths, or write it again.")


def check_encoding(encoding: Optional[str]) -> Optional[str]:
    """The encoding files are transcoded from, or None for UTF-8 (read as it is).

    The name must be known both to Python (the up-front check decodes with it) and to
    ICU (`tf.strings.unicode_transcode` converts with it in the pipeline); common names
    ("latin-1", "cp1252", "shift_jis", "utf-16") are.

    Raises:
        UserInputError: An encoding either of them does not know.
    """
    if encoding is None:
        return None
    import tensorflow as tf  # the readers' pipelines need it; this module's Python side not

    try:
        if codecs.lookup(encoding).name == "utf-8":
            return None
        tf.strings.unicode_transcode(b"", input_encoding=encoding, output_encoding="UTF-8")
    except (LookupError, TypeError, tf.errors.InvalidArgumentError):
        raise UserInputError(
            f"encoding must name a text encoding known to Python and ICU (e.g. 'utf-8', "
            f"'latin-1', 'cp1252', 'utf-16'), got encoding={encoding!r}.") from None
    return encoding


def as_utf8(text, *, encoding: Optional[str], max_length: Optional[int]):
    """`text` (a string tensor) transcoded from `encoding` to UTF-8, then cut to `max_length`.

    The cut is in bytes, as Keras' loader cuts (``tf.strings.substr``): a character of
    several bytes can be split at the end.
    """
    # Deferred: TensorFlow (seconds); this module reads local files TF-free (validate).
    import tensorflow as tf

    if encoding is not None:
        # The file decoded in the up-front check; "replace" only matters without it.
        text = tf.strings.unicode_transcode(text, input_encoding=encoding,
                                            output_encoding="UTF-8", errors="replace",
                                            replace_control_characters=False)
    if max_length is not None:
        text = tf.strings.substr(text, 0, max_length)
    return text


@contextlib.contextmanager
def open_text(path, *, encoding: Optional[str] = None, compression: Optional[str] = None,
              what: str = "Text file") -> Iterator[io.TextIOBase]:
    """A text handle over the file, read as it streams (for files too big to hold whole).

    Lines keep their line ends (``newline=""``, what `csv` needs); a leading byte-order
    mark is dropped. An error met while reading is raised as `read_text` names it: an
    undecodable line (`NotText`, with its line), a cut-short or corrupt stream.
    """
    path = os.fspath(path)
    encoding = encoding or "utf-8"
    raw = _open_binary(path)
    try:
        binary = (gzip.GzipFile(fileobj=raw) if compression == "GZIP"
                  else io.BufferedReader(_ZlibReader(raw)) if compression == "ZLIB"
                  else raw)
        codec = "utf-8-sig" if encoding.replace("_", "-").lower() in ("utf-8", "utf8") \
            else encoding
        yield io.TextIOWrapper(binary, encoding=codec, newline="")
    except (UnicodeDecodeError, EOFError, OSError, zlib.error):
        # Read it again whole: the streaming error knows neither the line nor the cause.
        read_text(path, encoding=encoding, compression=compression, what=what)
        raise
    finally:
        raw.close()


class _ZlibReader(io.RawIOBase):
    """A readable binary stream over a zlib stream (TensorFlow's "ZLIB" files)."""

    def __init__(self, raw):
        super().__init__()
        self._raw, self._zlib, self._pending = raw, zlib.decompressobj(), b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._pending:
            chunk = self._raw.read(1 << 16)
            if not chunk:
                if not self._zlib.eof:
                    raise EOFError("zlib stream ends before its end marker")
                return 0
            self._pending = self._zlib.decompress(chunk)
        size = min(len(buffer), len(self._pending))
        buffer[:size], self._pending = self._pending[:size], self._pending[size:]
        return size
