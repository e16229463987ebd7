#!/usr/bin/python3
"""Writes tokenizer_strings.jsonl: a deterministic test set of >= 2000 strings for the tokenizer
equality tests (tests/text/hf_tokenizer_test.cpp). One JSON string per line.

Made from hand-written fragments (several scripts and languages, code, numbers, whitespace,
emoji and ZWJ sequences, special-token text, Jinja-looking text) combined by a seeded PRNG,
plus NFD forms. Run: /usr/bin/python3 gen_tokenizer_strings.py > tokenizer_strings.jsonl
"""
import json
import random
import unicodedata

FRAGMENTS = [
    # Latin scripts
    "The quick brown fox jumps over the lazy dog.", "Hello, world!", "don't", "I'll", "we've", "they're",
    "IT'S", "He'D", "naïve café", "Ångström", "façade", "Straße", "œuvre", "Zürich", "ÉCOLE", "İstanbul",
    "ﬁnancial ﬂow", "Ｆｕｌｌｗｉｄｔｈ", "x²+y³", "½ ¼ ¾", "ǅemal",
    # CJK
    "你好，世界！", "我们今天去公园散步。", "東京は日本の首都です。", "カタカナとひらがな", "한국어 문장입니다.",
    "中文English混合", "「引用」『二重』", "龘靐齉", "〇一二三", "々〆〤",
    # Arabic, Hebrew, Hindi, Cyrillic, Thai, Greek, others
    "مرحبا بالعالم", "اللغة العربية جميلة", "٠١٢٣٤٥٦٧٨٩", "שלום עולם", "नमस्ते दुनिया", "हिन्दी भाषा",
    "Привет, мир!", "Съешь же ещё этих мягких французских булок", "สวัสดีชาวโลก", "ภาษาไทยไม่มีช่องว่าง",
    "Γειά σου Κόσμε", "Ελληνικά", "ሰላም", "გამარჯობა", "Բարեւ", "தமிழ்", "বাংলা", "ລາວ", "မြန်မာ",
    # code
    "def f(x):\n    return x**2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}", "#include <vector>",
    "const x = () => { return 42; };", "SELECT * FROM users WHERE id = 1;", "if __name__ == '__main__':",
    "std::vector<std::string> v{\"a\", \"b\"};", "<div class=\"x\">text</div>", "a && b || !c", "x->y.z[0]",
    "    indented", "\t\ttabs", "path/to/file.txt", "https://example.com/a?b=c&d=e", "user@example.com",
    "$HOME/.bashrc", "C:\\Windows\\System32", "0x1F600", "#!/bin/sh", "`backticks`", "--flag=value",
    # numbers
    "123", "1234567890", "3.14159", "-42", "1,000,000", "1e-9", "2026-12-02", "12:34:56", "007", "99.99%",
    "١٢٣", "१२३४", "๑๒๓",
    # whitespace
    " ", "  ", "     ", "\n", "\n\n", "\n\n\n", "\t", " \t \n ", "\r\n", "line1\nline2", "a  b   c", "trailing   ",
    "   leading", "\u00a0nbsp", "\u3000ideographic", "\u2003em space", "\u200bzero width",
    # emoji
    "😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🇯🇵🇺🇸", "🤖 robots", "✨✨✨", "1️⃣", "👩🏻‍💻",
    # special-token text (Qwen3 and DeepSeek-V3 vocabularies)
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "<|im_start|>user\nhi<|im_end|>",
    "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<|im_start|", "<|im_end",
    "<s>", "</s>", "<unk>", "[INST]", "<<SYS>>",
    # Jinja-looking text
    "{{ bos_token }}", "{% for message in messages %}", "{%- if tools %}", "{{- message['content'] }}",
    "{# comment #}", "{{ '<|im_start|>' + role }}", "{% endfor %}", "{{ x | trim }}",
    # punctuation and symbols
    "...", "!!!", "???", "—", "–", "«»", "„“", "©®™", "§¶", "∑∫∂", "→⇒", "★☆", "♠♣♥♦", "€$£¥", "'''", "\"\"\"",
    "'s", "'S", "'", "''", "ſ", "K", "ß",
]


def main():
    rng = random.Random(20261202)
    out = []
    seen = set()

    def add(s):
        if s not in seen:
            seen.add(s)
            out.append(s)

    for f in FRAGMENTS:
        add(f)
    seps = ["", " ", "  ", "\n", "\t", " \n", "\n\n", ", ", ". ", "\u3000"]
    while len(out) < 2400:
        k = rng.randint(2, 7)
        parts = [rng.choice(FRAGMENTS) for _ in range(k)]
        s = ""
        for p in parts:
            s += p + rng.choice(seps)
        if rng.random() < 0.15:
            s = unicodedata.normalize("NFD", s)
        if rng.random() < 0.1:
            s = s.upper()
        add(s)
    for s in list(out[:300]):
        add(unicodedata.normalize("NFD", s))
    for s in out:
        print(json.dumps(s, ensure_ascii=False))


main()
