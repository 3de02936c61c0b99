"""Whether a file is a whole 64-bit ELF shared library, checked before dlopen.

dlopen maps the file and can kill the process (SIGBUS) when a truncated file
ends before its segments do, instead of failing; reading the headers first
turns a damaged installation into an ImportError that says so.
"""

from __future__ import annotations

import struct
from pathlib import Path


def elf_problem(path: Path) -> str | None:
    """Why `path` is not a whole 64-bit ELF file, or None."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as file:
            header = file.read(64)
            if header[:4] != b"\x7fELF" or len(header) < 64:
                return "it is not an ELF shared library"
            if header[4] != 2:
                return "it is not a 64-bit ELF file"
            order = "<" if header[5] == 1 else ">"
            program_offset, section_offset = struct.unpack_from(order + "QQ", header, 0x20)
            entry_size, entries, section_size, sections = struct.unpack_from(order + "HHHH", header, 0x36)
            ends = [section_offset + section_size * sections, program_offset + entry_size * entries]
            if max(ends) <= size:
                file.seek(program_offset)
                table = file.read(entry_size * entries)
                for start in range(0, len(table) - entry_size + 1, entry_size):
                    (offset,) = struct.unpack_from(order + "Q", table, start + 8)
                    (file_size,) = struct.unpack_from(order + "Q", table, start + 32)
                    ends.append(offset + file_size)
    except (OSError, struct.error) as error:
        return f"it cannot be read ({error})"
    if max(ends) > size:
        return f"it is truncated ({size} bytes; its contents reach byte {max(ends)})"
    return None
