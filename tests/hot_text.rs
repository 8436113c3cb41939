//! The `xdsfed` binary's link places the functions `link/hot-text.ld`
//! lists before the rest of its code (docs/performance.md, "The code the
//! command runs, placed together"). The build script hands the script to
//! the link on Linux unless the user chose a linker; when it has, this test
//! checks that the link honoured it and that the list still names the
//! build's functions (a build without v0 symbol names matches few).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

/// The size of each section of the ELF64 little-endian file at `path`, by
/// name.
fn section_sizes(path: &str) -> std::io::Result<Vec<(String, u64)>> {
    let mut file = File::open(path)?;
    let mut header = [0u8; 64];
    file.read_exact(&mut header)?;
    assert_eq!(&header[..4], b"\x7fELF", "{path} is no ELF file");
    assert_eq!(header[4], 2, "{path} is not a 64-bit ELF file");
    let table_at = u64::from_le_bytes(header[0x28..0x30].try_into().unwrap());
    let entry_size = usize::from(u16::from_le_bytes([header[0x3a], header[0x3b]]));
    let count = usize::from(u16::from_le_bytes([header[0x3c], header[0x3d]]));
    let names_index = usize::from(u16::from_le_bytes([header[0x3e], header[0x3f]]));
    let mut table = vec![0u8; entry_size * count];
    file.seek(SeekFrom::Start(table_at))?;
    file.read_exact(&mut table)?;
    let field = |entry: &[u8], at: usize| u64::from_le_bytes(entry[at..at + 8].try_into().unwrap());
    let entries: Vec<&[u8]> = table.chunks(entry_size).collect();
    let names_entry = entries[names_index];
    let mut names = vec![0u8; usize::try_from(field(names_entry, 32)).unwrap()];
    file.seek(SeekFrom::Start(field(names_entry, 24)))?;
    file.read_exact(&mut names)?;
    Ok(entries
        .iter()
        .map(|entry| {
            let at = u32::from_le_bytes(entry[..4].try_into().unwrap()) as usize;
            let end = names[at..]
                .iter()
                .position(|&b| b == 0)
                .map_or(names.len(), |n| at + n);
            let name = String::from_utf8_lossy(&names[at..end]).into_owned();
            (name, field(entry, 32))
        })
        .collect())
}

#[test]
fn the_listed_functions_come_first_in_the_binary() {
    let Some("linked") = option_env!("XDSFED_HOT_TEXT") else {
        eprintln!(
            "skipped: the build script did not link link/hot-text.ld (not Linux, or a linker of the user's)"
        );
        return;
    };
    let sections = section_sizes(env!("CARGO_BIN_EXE_xdsfed")).unwrap();
    let hot = sections.iter().find(|(name, _)| name == ".text.hot");
    let Some((_, size)) = hot else {
        panic!("the binary has no .text.hot section: {sections:?}");
    };
    // A release build places 2 MB there, a debug build (less inlined,
    // fewer of the listed names left whole) some 800 KB; legacy symbol
    // names would leave only the standard library's.
    assert!(*size > 256 * 1024, ".text.hot holds only {size} bytes");
}
