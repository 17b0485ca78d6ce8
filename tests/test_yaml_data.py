"""The parsed-YAML cache: an entry serves the same text only, a document JSON would change is
parsed every time, and a cache that cannot be used costs nothing but the parse."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest

from refsim.data import yaml_data


def test_a_cached_text_is_read_from_its_entry_and_an_edit_is_parsed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REFSIM_CACHE_DIR", str(tmp_path))
    assert yaml_data.load("a: [1, 2.5, x]\n") == {"a": [1, 2.5, "x"]}
    (entry,) = tmp_path.glob("yaml-*.json")
    # what is read is the entry: change it, and the same text reads the change
    entry.write_text(json.dumps({"a": "from the entry"}), encoding="utf-8")
    assert yaml_data.load("a: [1, 2.5, x]\n") == {"a": "from the entry"}
    # an edited file is another text, so another entry: never a stale one
    assert yaml_data.load("a: [1, 2.5, y]\n") == {"a": [1, 2.5, "y"]}
    assert len(list(tmp_path.glob("yaml-*.json"))) == 2


def test_a_document_json_would_change_is_not_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REFSIM_CACHE_DIR", str(tmp_path))
    for text, value in (("when: 2026-12-06\n", {"when": datetime.date(2026, 12, 6)}),
                        ("1: one\n", {1: "one"}), ("true: yes\n", {True: True})):
        assert yaml_data.load(text) == value
        assert yaml_data.load(text) == value
    assert list(tmp_path.glob("yaml-*")) == []


def test_a_bad_document_is_the_parser_s_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REFSIM_CACHE_DIR", str(tmp_path))
    with pytest.raises(Exception) as raised:
        yaml_data.load("a: [1, 2\n")
    assert yaml_data.is_error(raised.value)
    assert not yaml_data.is_error(ValueError("not YAML's"))


def test_off_or_unusable_the_text_is_parsed(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REFSIM_CACHE_DIR", "off")
    assert yaml_data.cache_dir() is None
    assert yaml_data.load("k: v\n") == {"k": "v"}
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    monkeypatch.setenv("REFSIM_CACHE_DIR", str(blocker / "cache"))
    assert yaml_data.load("k: w\n") == {"k": "w"}


def test_the_folder_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REFSIM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(yaml_data, "CACHE_MAX_FILES", 3)
    for n in range(6):
        assert yaml_data.load(f"n: {n}\n") == {"n": n}
    assert len(list(tmp_path.glob("yaml-*.json"))) == 3
