"""Which item columns become which typed KG relations, per item domain.

A relation links an item to attribute values ("Heat" -Directed_by-> "Michael
Mann"). `specific` relations name few items each (a director, an actor, an
author, a brand): condition queries are anchored on at least one of them, as
"war movies" alone describes a thousand films but "war movies starring Tom
Hanks" a handful.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class RelationSpec:
    name: str
    column: str
    specific: bool = False
    #: raw cell value -> KG value (None drops it); applied to each element of a list cell
    transform: Callable[[object], str | None] | None = None


def _decade(year: object) -> str | None:
    try:
        y = int(year)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return f"{y // 10 * 10}s" if 1800 <= y <= 2100 else None


# TML1M lists spoken languages by their own names (TMDB style); queries read
# better with English names, and "Pусский"/"Russian" are one language.
LANGUAGE_NAMES = {
    "English": "English", "Français": "French", "Español": "Spanish", "Italiano": "Italian", "Deutsch": "German",
    "Pусский": "Russian", "Russian": "Russian", "日本語": "Japanese", "Latin": "Latin", "普通话": "Mandarin",
    "广州话 / 廣州話": "Cantonese", "Português": "Portuguese", "العربية": "Arabic", "Arabic": "Arabic",
    "Magyar": "Hungarian", "Polski": "Polish", "Polish": "Polish", "svenska": "Swedish", "Tiếng Việt": "Vietnamese",
    "עִבְרִית": "Hebrew", "ελληνικά": "Greek", "Český": "Czech", "Gaeilge": "Irish", "Nederlands": "Dutch",
    "हिन्दी": "Hindi", "Srpski": "Serbian", "한국어/조선말": "Korean", "Norsk": "Norwegian", "Bokmål": "Norwegian",
    "Türkçe": "Turkish", "فارسی": "Persian", "ภาษาไทย": "Thai", "Afrikaans": "Afrikaans", "Dansk": "Danish",
    "Kiswahili": "Swahili", "Bosanski": "Bosnian", "Hrvatski": "Croatian", "Română": "Romanian", "shqip": "Albanian",
    "Cymraeg": "Welsh", "Català": "Catalan", "български език": "Bulgarian", "বাংলা": "Bengali", "Íslenska": "Icelandic",
    "اردو": "Urdu", "suomi": "Finnish", "Bahasa melayu": "Malay", "ਪੰਜਾਬੀ": "Punjabi", "Bahasa indonesia": "Indonesian",
    "Esperanto": "Esperanto", "ქართული": "Georgian", "Український": "Ukrainian", "Malti": "Maltese",
    "Slovenčina": "Slovak", "தமிழ்": "Tamil", "euskera": "Basque", "Galego": "Galician", "Spanish": "Spanish",
    "Slovenščina": "Slovenian", "සිංහල": "Sinhala", "Latviešu": "Latvian", "Azərbaycan": "Azerbaijani",
    "Hausa": "Hausa", "isiZulu": "Zulu", "Yiddish": "Yiddish", "Wolof": "Wolof",
}
_NO_LANGUAGE = {"No Language", "Silent", ""}


def _language(v: object) -> str | None:
    s = str(v).strip()
    if s in _NO_LANGUAGE:
        return None
    return LANGUAGE_NAMES.get(s, s)


def _certificate(v: object) -> str | None:
    s = str(v).strip()
    # "NR" (not rated) says nothing a user would ask for
    return None if s in ("", "NR", "Not Rated", "Unrated") else s


def _text(v: object) -> str | None:
    s = " ".join(str(v).split())
    return s or None


MOVIE_RELATIONS = (
    RelationSpec("Directed_by", "directors", specific=True, transform=_text),
    RelationSpec("Starring", "cast", specific=True, transform=_text),
    RelationSpec("Genre", "genres", transform=_text),
    RelationSpec("Language", "languages", transform=_language),
    RelationSpec("Certificate", "certificate", transform=_certificate),
    RelationSpec("Release_decade", "year", transform=_decade),
)

# Amazon Reviews 2023 metadata: `store` is the brand/store, `main_category` and
# `categories` the category path, `author` (books) the author's name.
AMAZON_RELATIONS = (
    RelationSpec("Store", "store", specific=True, transform=_text),
    RelationSpec("Author", "author", specific=True, transform=_text),
    RelationSpec("Category", "main_category", transform=_text),
    RelationSpec("Category", "categories", transform=_text),
)

ALL_RELATIONS = MOVIE_RELATIONS + AMAZON_RELATIONS


def specs_for(columns: list[str] | set[str]) -> tuple[RelationSpec, ...]:
    """The relation specs whose source column the item table has."""
    cols = set(columns)
    return tuple(s for s in ALL_RELATIONS if s.column in cols)
