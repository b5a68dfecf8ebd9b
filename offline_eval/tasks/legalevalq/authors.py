"""The LegalEval-Q authors' protocol as data, each piece with the place it was taken from (GitHub lyxx3rd/LegalEval-Q
at commit 4e78669): their evaluator's instruction (its eight conclusion grades inside it), system prompt, message
layout, decoding and tag parsing (src/evaluator_request.py), and the candidates' system prompt and answer length
(notebooks/Evaluate_batch.ipynb). The strings are copied byte for byte; the functions apply their rules, and the
one difference (a missing tag is a parse failure, where their slicing returns garbage) is named where it is made."""

from __future__ import annotations

from offline_eval.tasks.kit import Source

REPO = "lyxx3rd/LegalEval-Q"
COMMIT = "4e786699b3ffe09cb8a0b2e0fd2677da2ed3ccac"
EVALUATOR_FILE = "src/evaluator_request.py"
BATCH_NOTEBOOK = "notebooks/Evaluate_batch.ipynb"  # line numbers: of the notebook's JSON file


def _at(path: str, lines: str) -> Source:
    return Source(REPO, COMMIT, path, lines)


# The evaluator's instruction, the source line's string literal copied as it is (src/evaluator_request.py line 37).
INSTRUCTION = "下列给出了一个用户输入的询问query, 语言模型生成的query的回复文本content请根据这两个内容生成这个content的文本质量评论, 只需给出文字的评价\n评价应从以下方面进行,只评价不足或非常到位的点, 不要泛泛而谈的内容\n内容质量:扣题程度, 专业知识准确性, 回答深度以及联想的广度, 文本逻辑性; 结构与组织:清晰度,条理性和层次感; 语言表达:语法与拼写, 冗余程度, 流畅性, 风格适配; 其他可以考虑的方面; 存在的缺点\n先给出文字评价, 对评价做出最终结论, 结论包括以下等级: 该回复属于完全不可用的回复; 该回复属于几乎不可用的回复; 该回复为不及格答案; 该回复为及格但是最基础回复; 该回复尝试深度回复但是存在明显短缺; 该回复尝试深度回复但是存在一定程度的缺漏或问题; 该回复几乎没有明显缺陷; 该回复几乎没有缺陷且存在明显闪光点.\n参考标准: 内容重复逻辑混乱但内容与有query关为不及格答案; 存在严重错误也为不及格; 结构清晰但内容泛泛为及格但是最基础回复; 虽然主题相关但未完全扣紧主题且部分内容冗余为及格但是最基础回复.\n输出格式为:<reasoning>文本评价</reasoning>\n<ans>结论等级</ans>"
INSTRUCTION_SOURCE = _at(EVALUATOR_FILE, "37")

# The eight conclusion grades, lowest first, as the instruction lists them ("结论包括以下等级: a; b; ...; h.").
GRADES: tuple[str, ...] = tuple(INSTRUCTION.split("结论包括以下等级: ", 1)[1].split(".\n", 1)[0].split("; "))
GRADES_SOURCE = INSTRUCTION_SOURCE

# chat_transformers_model's default system prompt, used for every evaluation (line 92) and by the batch notebook's
# chat_local_model.chat_transformers_model for every candidate answer (notebook line 65).
SYSTEM = "你是一个有用的助手"
SYSTEM_SOURCE = _at(EVALUATOR_FILE, "92")
ANSWER_SYSTEM_SOURCE = _at(BATCH_NOTEBOOK, "65")

# Decoding: `model.generate(**inputs, max_new_tokens=N)` and nothing else, so the weights' own generation_config
# decides how tokens are drawn (do_sample, temperature, top_p, top_k, ...). The evaluator: 512 new tokens (line 106);
# a candidate: 1024 (notebook line 79).
EVALUATOR_MAX_NEW_TOKENS = 512
EVALUATOR_DECODING_SOURCE = _at(EVALUATOR_FILE, "104-107")
ANSWER_MAX_NEW_TOKENS = 1024
ANSWER_DECODING_SOURCE = _at(BATCH_NOTEBOOK, "77-80")

# The candidate's user message is the query itself (notebook line 257: chat_transformers_model(query)).
ANSWER_MESSAGE_SOURCE = _at(BATCH_NOTEBOOK, "257")

# The query files their batch evaluation reads (data/evaluate_data/random_sampled_query_evaluation_{N}.json).
QUERY_FILES = tuple(f"data/evaluate_data/random_sampled_query_evaluation_{n}.json" for n in (45, 60, 150, 600))

MESSAGE_SOURCE = _at(EVALUATOR_FILE, "132-133")
PARSE_SOURCE = _at(EVALUATOR_FILE, "136-141")
SCORER_SOURCE = _at(EVALUATOR_FILE, "143")  # score = predict(reasoning, ans, input_content) * 100

REASONING_OPEN, REASONING_CLOSE = "<reasoning>:", "</reasoning>"
ANS_OPEN, ANS_CLOSE = "<ans>:", "</ans>"


def input_content(query: str, content: str) -> str:
    """The query and the candidate's answer as the evaluator reads them, and as the scorer's third input
    (bert_content) gets them (line 132)."""
    return f"<query>:{query}</query>\n\n<content>:{content}</content>"


def user_message(query: str, content: str) -> str:
    """The evaluator's user message: the instruction, a newline, the input content (line 133). Everything before the
    answer is the same for every candidate's answer to one query."""
    return f"{INSTRUCTION}\n{input_content(query, content)}"


def parse(text: str) -> tuple[str, str] | None:
    """(reasoning, ans) as their code slices them (lines 136-141): the text between the first "<reasoning>:" and
    the first "</reasoning>", and between the first "<ans>:" and the first "</ans>", as it is (not stripped).

    The one difference: where a tag is missing (str.find gives -1) or a closing tag comes before its opening tag's
    end, their slice is garbage (from the text's last character, or empty) that they still score; here it is a parse
    failure (None), counted and never scored."""
    r0, r1 = text.find(REASONING_OPEN), text.find(REASONING_CLOSE)
    a0, a1 = text.find(ANS_OPEN), text.find(ANS_CLOSE)
    if min(r0, r1, a0, a1) < 0:
        return None
    r0, a0 = r0 + len(REASONING_OPEN), a0 + len(ANS_OPEN)
    if r1 < r0 or a1 < a0:
        return None
    return text[r0:r1], text[a0:a1]


def grade_of(ans: str) -> str | None:
    """Which of the eight grades an <ans> text is (their evaluator writes it with a closing period, e.g.
    "该回复尝试深度回复但是存在一定程度的缺漏或问题."); None: none of them. Only recorded: the scorer reads the text as
    it is, whatever it says."""
    core = ans.strip().rstrip(".。").strip()
    return core if core in GRADES else None
