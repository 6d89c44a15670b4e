"""The words of a message as PostgreSQL's search index holds them: one expression, spelled
the same by the index (schema step 16) and by every search that must use it."""


def postgres_search_words(row: str = "") -> str:
    """PostgreSQL's expression for the words of a message's three term columns (of ``row``,
    an alias, or the table itself): what its GIN search index holds and a search's ``&&``
    must spell the same way for the index to be used."""
    prefix = f"{row}." if row else ""
    return (
        f"(string_to_array({prefix}terms, ' ') || string_to_array({prefix}before_terms, ' ')"
        f" || string_to_array({prefix}after_terms, ' '))"
    )
