"""docs/configuration.md is what the settings model generates, and the model describes every
setting (memora.basics.settings_doc)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memora.basics import settings_doc
from memora.basics.config import SECTIONS, Settings, known_variables

COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_committed_reference_is_the_generated_one() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == settings_doc.render(), (
        f"docs/configuration.md is out of date: run `{settings_doc.COMMAND}`"
    )


def test_every_setting_has_a_description_and_one_section() -> None:
    undescribed = [n for n, info in Settings.model_fields.items() if not info.description]
    assert undescribed == []
    owners = [name for section in SECTIONS for name in section.model_fields]
    assert sorted(owners) == sorted(Settings.model_fields)
    assert settings_doc.sections_of() == list(SECTIONS)


def test_every_section_has_a_title_and_an_introduction() -> None:
    titles = [settings_doc._title(section) for section in SECTIONS]
    assert all(titles) and len(set(titles)) == len(titles)
    assert all(settings_doc._introduction(section) for section in SECTIONS)


def test_every_environment_name_is_in_the_reference() -> None:
    text = settings_doc.render()
    assert [name for name in sorted(known_variables()) if f"`{name}`" not in text] == []


def test_check_mode_fails_on_a_stale_file(tmp_path: Path) -> None:
    output = tmp_path / "configuration.md"
    assert settings_doc.main(["--check", "--output", str(output)]) == 1  # missing
    assert settings_doc.main(["--output", str(output)]) == 0
    assert settings_doc.main(["--check", "--output", str(output)]) == 0
    output.write_text(output.read_text(encoding="utf-8") + "\nedited by hand\n")
    assert settings_doc.main(["--check", "--output", str(output)]) == 1


def test_a_setting_without_a_description_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    info = Settings.model_fields["rrf_k"]
    monkeypatch.setattr(info, "description", None)
    with pytest.raises(settings_doc.UndescribedSetting, match="rrf_k"):
        settings_doc.render()


def test_machine_dependent_defaults_are_shown_as_rules() -> None:
    fields = Settings.model_fields
    assert settings_doc.default_text(fields["data_dir"]) == "`$TMPDIR/memora`"
    assert settings_doc.default_text(fields["query_port"]) == "`MEMORA_PORT` + 1"
    assert settings_doc.default_text(fields["sensitive_categories"]) == "`health`"
    assert settings_doc.type_text(fields["importance_minimum"]) == "number, ≥ 1 and ≤ 10"
