// GPT-2's byte-level alphabet: every byte 0..255 is shown as one printable Unicode
// character, so byte-level BPE vocabularies are plain strings. Bytes '!'..'~', 0xA1..0xAC
// and 0xAE..0xFF stand for themselves; the other 68 bytes map, in increasing order, to
// U+0100, U+0101, ... (so ' ' (0x20) is 'Ġ' U+0120 and '\n' is 'Ċ' U+010A).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ninfer::byte_level {

// The UTF-8 encoding of the character that stands for byte b.
const std::string& byte_to_char(uint8_t b);

// The byte a character stands for, or nullopt if cp is not in the alphabet.
std::optional<uint8_t> char_to_byte(char32_t cp);

// Maps every byte of s to its character (the pre-tokenizer direction).
std::string encode(std::string_view s);

// Maps the characters of s back to bytes; nullopt if any character is outside the alphabet
// (Hugging Face then keeps that token's own UTF-8 bytes, e.g. for added tokens).
std::optional<std::string> decode(std::string_view s);

}  // namespace ninfer::byte_level
