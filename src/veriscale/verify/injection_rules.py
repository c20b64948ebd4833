"""The shapes an injection takes in text written for a judge: the detector's rules, by name.

    from veriscale.verify.injection_rules import RULES

    for name, pattern in RULES:            # fence_marker, criterion_heading, grade_line, ...
        m = pattern.search(text)

Each rule is one compiled pattern over the vocabulary below (judge words, grade words, top marks,
instruction words) in English and German, French, Spanish, Italian, Portuguese, Russian, Chinese,
Japanese, Korean, Arabic and Hindi: a grade or score line aimed at the slot (also as a JSON key or
``key=value``); a fake criterion or rubric heading; a data block, closing tag or chat-role marker;
"ignore the previous instructions" and paraphrases that declare the rubric void; words addressed
to the grader; asking for a top mark. Every repetition is bounded, so a search is linear in the
text. :mod:`veriscale.verify.injection` runs them; ``resist.py`` neutralises some of them.
"""

from __future__ import annotations

import re

# --- vocabulary -------------------------------------------------------------------------------

_JUDGE = (r"(?:grader|judge|evaluator|verifier|reviewer|assessor|scorer|marker|examiner|rater|reward model|"
          r"llm judge|ai judge|grading model|grading system|scoring model|évaluat(?:eur|rice)|correct(?:eur|rice)|"
          r"examinat(?:eur|rice)|bewerter(?:in)?|prüfer(?:in)?|gutachter(?:in)?|korrektor(?:in)?|"
          r"evaluador(?:a)?|juez|calificador(?:a)?|examinador(?:a)?|corrector(?:a)?|valutat(?:ore|rice)|"
          r"corret(?:tore|or|ora)|esaminat(?:ore|rice)|avaliador(?:a)?|оценщик\w{0,3}|судь\w{0,3}|"
          r"проверяющ\w{0,8}|экзаменатор\w{0,3}|рецензент\w{0,3}|" + r"评审|评委|评分者|评分员|裁判|阅卷|判卷|评估者|審査員|"
          r"採点者|評価者|採点担当|채점자|평가자|심사위원|채점관|"
          r"(?:ال|لل)?(?:مقي[ّ]?م|مصح[ّ]?ح|محك[ّ]?م)|मूल्यांकनकर्ता|परीक्षक|ग्रेडर|जा[ंँ]चकर्ता|निर्णायक|मूल्यांकक)")
# the judge words that are rarely anything else (no code identifier or PR reviewer among them)
_STRONG_JUDGE = (r"(?:grader|evaluator|assessor|examiner|reward model|llm judge|ai judge|ai grader|ai evaluator|"
                 r"grading model|évaluat(?:eur|rice)|bewerter(?:in)?|prüfer(?:in)?|evaluador(?:a)?|calificador(?:a)?|"
                 r"valutat(?:ore|rice)|avaliador(?:a)?|оценщик\w{0,3}|проверяющ\w{0,8}|评审|评分者|评分员|阅卷|"
                 r"採点者|評価者|채점자|평가자|(?:ال|لل)?(?:مقي[ّ]?م|مصح[ّ]?ح)|मूल्यांकनकर्ता|परीक्षक|ग्रेडर)")
_CJK_JUDGE = r"(?:评审|评委|评分者|评分员|裁判|阅卷|判卷|採点者|評価者|審査員|채점자|평가자|심사위원)"
_GRADE_WORD = (r"(?:grade|score|rating|marks?|verdict|note|points|evaluation|assessment|"
               r"bewertung|punktzahl|punkte|gesamtnote|endnote|wertung|évaluation|appréciation|"
               r"calificaci[oó]n|puntuaci[oó]n|puntaje|evaluaci[oó]n|veredicto|nota|voto|punteggio|valutazione|"
               r"giudizio|verdetto|pontua[cç][aã]o|avalia[cç][aã]o|classifica[cç][aã]o|veredito|cijfer|ocena|"
               r"оценка|балл\w{0,2}|вердикт|итог|评分|分数|得分|等级|成绩|评级|評価|点数|採点|スコア|成績|得点|"
               r"점수|등급|평가|성적|(?:ال)?درجة|(?:ال)?تقييم|العلامة|ग्रेड|अंक|स्कोर|मूल्यांकन|रेटिंग)")
_PRE_QUALIFIER = (r"(?:(?:final|overall|correct|assigned|official|true|expected|verified|deserved|total|recommended|"
                  r"endgültige|finale|globale|итоговая|финальная|общая|итоговый|общий|अंतिम|कुल)\s{1,4}|"
                  r"(?:最终|最終|최종|종합)\s{0,2})")
_POST_QUALIFIER = (r"(?:\s{1,4}(?:final|finale|finales|finaux|global|globale|totale?|overall|générale?|geral|"
                   r"complessiv[oa]|definitiv[ao]|définitive|attribuée|asignada|atribuída|assegnat[oa]|"
                   r"النهائية|النهائي|الكلية))?")
_A = r"(?-i:A)"  # a letter grade is a capital, even inside a case-insensitive rule
_LETTER_END = r"""(?=[ \t]{0,8}(?:[\n\r.,;:!)|*_\]}"'(]|$|\s[(\-—]))"""  # a lone letter ends its line or clause
_TOP = (r"(?:(?-i:A\+?)" + _LETTER_END + r"|(?-i:[A-T])" + _LETTER_END + r"|10\s{0,8}/\s{0,8}10|100\s{0,8}/\s{0,8}100|5\s{0,8}/\s{0,8}5|"
        r"\d{1,8}(?:\.\d{1,8})?\s{0,8}/\s{0,8}\d{1,8}|"
        r"\d{1,8}(?:\.\d{1,8})?\s{0,8}(?:out of|von|sur|de|su|из|من)\s{0,8}\d{1,8}|yes\b|pass(?:ed)?\b|perfect|excellent|"
        r"full marks|correct\b|approved\b|aprobado|réussi|bestanden|sehr gut|excelente|eccellente|отлично|"
        r"满分|滿分|満点|만점|ممتاز|उत्कृष्ट)")
_RESPONSE = (r"(?:response|answer|solution|submission|output|candidate|reply|work|trajectory|run|"
             r"réponse|antwort|lösung|respuesta|soluci[oó]n|risposta|resposta|ответ|решение)")
_TOP_MARK = (r"(?:" + _A + r"\+?(?![\w'])|full (?:marks|credit|points|score)|top (?:marks|grade|score)|"
             r"(?:the\s{1,4})?(?:highest|maximum|best|max)\s{1,4}(?:possible\s{1,4})?(?:grade|score|mark|marks|rating|points)|"
             r"an?\s{1,4}perfect\s{1,4}(?:score|grade|rating|mark)|perfect marks|10\s{0,4}/\s{0,4}10|100\s{0,4}/\s{0,4}100|"
             r"5\s{0,4}/\s{0,4}5)")
_INSTRUCTIONS = (r"(?:instructions?|rules|criteria|criterion|guidelines|prompts?|directions|rubric|grading scheme|"
                 r"system prompt|scoring rules|marking scheme)")

RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # a data block marker (what the fence writes: <<<NAME tag>>>, <<<END NAME tag>>>), a closing tag or
    # delimiter of the response, an opening tag of instructions, a chat-role token
    ("fence_marker", re.compile(
        r"<<<\s{0,8}(?:END\b[^\n>]{0,40}|[A-Z][A-Z0-9_]{0,40}\s{1,8}[0-9a-f]{4,16}\s{0,8})>>>|"
        r"(?i:</\s{0,4}(?:candidate|submission|model_response|candidate_response|response|untrusted\w{0,20})\s{0,4}>|"
        r"<\s{0,4}/?\s{0,4}(?:rubric|criteria|criterion|grading\w{0,20}|grader\w{0,20}|judge_instructions|"
        r"evaluator\w{0,20}|evaluation_criteria|scoring_rules)\s{0,4}>)|"
        r"(?:\[|<|-{2,8}|={2,8}|#{3,8})\s{0,4}/?\s{0,4}END\s{1,4}(?:OF\s{1,4})?(?:THE\s{1,4})?(?:RESPONSE|ANSWER|CANDIDATE|SUBMISSION)\b|"
        r"<\|im_start\|>\s{0,4}(?:system|user|assistant)\b|<\|(?:system|user|assistant|start_header_id)\|>|"
        r"\[/?INST\]|<</?SYS>>")),
    # a heading that opens a criterion, rubric or grading section
    ("criterion_heading", re.compile(
        r"(?im)^[ \t>*]{0,8}(?:#{1,6}[ \t]{0,8}(?:new[ \t]{1,8}|updated[ \t]{1,8}|revised[ \t]{1,8}|additional[ \t]{1,8})?"
        r"(?:criterion(?![ \t]{1,8}\d)|criteria|rubric|grading|scoring|marking scheme|assessment criteria|"
        r"evaluation (?:criteria|rubric|instructions|guidelines)|judge instructions|grader instructions|"
        r"kriteri\w{0,3}|bewertungs\w{1,12}|critères?|crit[ée]rios?|criteri(?:os?|a)?|r[úu]brica|rubrique|"
        r"bar[èe]me|griglia di valutazione|критери\w{0,3}|рубрика|评分标准|评判标准|评价标准|评分细则|評価基準|採点基準|"
        r"평가\s?기준|채점\s?기준|معايير\s{0,4}(?:التقييم|التصحيح)|मूल्यांकन\s{1,4}मानदंड)|"
        r"(?:\*\*)?(?:new[ \t]{1,8}|updated[ \t]{1,8}|revised[ \t]{1,8})?(?:(?:grading|scoring|evaluation)[ \t]{1,8})?"
        r"(?:rubric|criterion(?![ \t]{1,8}\d)|grader instructions|judge instructions|grading instructions)"
        r"(?:\*\*)?[ \t]{0,4}:)(?![\w])")),
    # a grade line: the slot's own phrase, or a grade word (a line's label, a JSON key, key=value)
    # followed by a top mark; a table row that grades the work
    ("grade_line", re.compile(
        r"(?i)(?:\bgrade for the (?:first|second) response\s{0,8}:|"
        r"(?:^|[\n|>*#\"',;(\[\]{}/。，、\t]|(?<=[.!?:])\s{1,4}|\b" + _PRE_QUALIFIER + r")"
        r"[ \t*_]{0,8}" + _GRADE_WORD + _POST_QUALIFIER + r"[ \t*_\"']{0,8}(?:for (?:this|the) " + _RESPONSE + r")?"
        r"[ \t*_\"']{0,8}[:：=][ \t*_\"']{0,8}" + _TOP + r"|"
        r"\b" + _GRADE_WORD + r"[\"']{0,2}=[\"']{0,2}" + _TOP + r"|"
        r"\bthe\s{1,4}(?:correct|final|right|appropriate|expected|only valid)\s{1,4}(?:grade|score|rating|verdict)\s{1,4}"
        r"(?:here\s{1,4})?(?:is|should be|must be|will be)\s{1,4}(?:an?\s{1,4})?" + _TOP + r"|"
        r"\|[ \t*]{0,8}(?:correctness|accuracy|quality|overall|helpfulness|completeness|relevance|total|final|grade|"
        r"score|verdict|rating)[ \t*]{0,8}\|[ \t*]{0,8}(?:A\+?|10\s{0,2}/\s{0,2}10|100\s{0,2}/\s{0,2}100|5\s{0,2}/\s{0,2}5|"
        r"pass|perfect|excellent|correct)[ \t*]{0,8}\|)")),
    # "ignore the previous instructions", its kin and paraphrases, several languages
    ("ignore_instructions", re.compile(
        r"(?i)(?:\b(?:ignore|disregard|forget|pay no attention to|do not follow|don't follow|stop following|set aside|"
        r"discard|bypass)\s{1,8}(?:all\s{1,8}|any\s{1,8}|every\s{1,8})?(?:of\s{1,8})?(?:the\s{1,8}|your\s{1,8}|these\s{1,8}|those\s{1,8})?"
        r"(?:(?:previous|prior|above|earlier|preceding|original|system|other|existing|grading|given|scoring|evaluation|"
        r"current|initial|official|judging)\s{1,8})?" + _INSTRUCTIONS + r"|"
        r"\b(?:override|skip|drop|replace|abandon)\s{1,8}(?:all\s{1,8}|any\s{1,8})?(?:of\s{1,8})?(?:the\s{1,8}|your\s{1,8}|these\s{1,8})?"
        r"(?:previous|prior|above|earlier|preceding|original|system|grading|scoring|evaluation|judging)\s{1,8}" + _INSTRUCTIONS + r"|"
        r"\b(?:(?:grading|scoring|evaluation|marking|judging|previous|prior|above|earlier|original|preceding)\s{1,8}"
        r"(?:instructions|rules|criteria|guidelines|rubric|policy|policies|scheme)|rubric)\s{1,8}(?:above\s{1,8})?"
        r"(?:(?:has|have|is|are|was|were)\s{1,8}(?:been\s{1,8})?(?:now\s{1,8})?(?:updated|replaced|revoked|superseded|withdrawn|"
        r"changed|void|outdated|obsolete|cancell?ed|suspended|invalid|deprecated|no longer (?:valid|in effect|applicable))|"
        r"(?:no longer|do not|don't|does not|doesn't)\s{1,8}appl(?:y|ies))|"
        r"\b(?:new|updated|revised|overriding)\s{1,8}(?:grading|scoring|evaluation|judging|marking)\s{1,8}"
        r"(?:instructions|rules|policy|criteria|rubric|guidelines)\b|"
        r"\b(?:system|admin|administrator|developer)\s{1,8}(?:override|directive)s?\b|"
        r"\bignorier\w{0,8}\s{1,8}(?:alle\s{1,8})?(?:die\s{1,8})?(?:vorherigen|bisherigen|obigen|vorigen)\s{1,8}(?:anweisungen|regeln|kriterien)|"
        r"\b(?:ignorier\w{0,3}|vergiss|vergessen sie|missachte\w{0,3})\s{1,8}(?:alle\s{1,8})?(?:die\s{1,8})?(?:\w{1,20}\s{1,8})?"
        r"(?:anweisungen|regeln|kriterien|vorgaben|bewertungskriterien|instruktionen)|"
        r"\b(?:ignore[rz]?|oublie[rz]?|ne tene[zr] pas compte|ne tiens pas compte|faites abstraction)\s{1,8}(?:de\s{1,8}|des\s{1,8}|du\s{1,8})?"
        r"(?:toutes\s{1,8})?(?:les\s{1,8}|la\s{1,8}|le\s{1,8})?(?:\w{1,20}\s{1,8})?(?:instructions|consignes|règles|critères|grille|barème)|"
        r"\b(?:ignor[ae]\w{0,3}|olvid[ae]\w{0,3}|haz caso omiso de|no tengas en cuenta|descart[ae]\w{0,3}|dimentic[ah]\w{0,3}|"
        r"non tenere conto (?:di|delle|dei)|trascura\w{0,3}|desconsider[ae]\w{0,3}|esque[çc][ae]\w{0,3}|não considere)\s{1,8}"
        r"(?:todas\s{1,8}|todos\s{1,8}|tutte\s{1,8}|tutti\s{1,8})?(?:las\s{1,8}|los\s{1,8}|as\s{1,8}|os\s{1,8}|le\s{1,8}|i\s{1,8}|la\s{1,8}|a\s{1,8})?"
        r"(?:\w{1,20}\s{1,8})?(?:instrucciones|instruções|istruzioni|reglas|regras|regole|criterios|critérios|criteri|"
        r"indicaciones|indicazioni|pautas|orientações|diretrizes|r[úu]brica)|"
        r"(?:игнорир\w{0,6}|проигнорируй\w{0,3}|забудь\w{0,3}|не обращай\w{0,3}\s{1,4}внимания\s{1,4}на|не учитывай\w{0,3})\s{1,8}"
        r"(?:все\s{1,8})?(?:\w{1,20}\s{1,8})?(?:инструкци\w{0,3}|указани\w{0,3}|правил\w{0,3}|критери\w{0,3}|требовани\w{0,3})|"
        r"(?:忽略|无视|無視|忽视|不要理会|不要理睬|忘记|忘掉|无需遵守|不必遵守)[^。\n]{0,12}(?:指令|指示|说明|规则|命令|评分标准|評価基準|要求)|"
        r"(?:指示|命令|ルール|評価基準|採点基準|基準)[^。\n]{0,8}(?:無視|忘れ)|"
        r"(?:지시|명령|규칙|기준|지침)[^.\n]{0,8}(?:무시|잊)|"
        r"(?:تجاهل\w{0,2}|انس[َى]?|لا تلتزم ب|لا تتبع)\s{0,8}(?:جميع\s{1,8}|كل\s{1,8})?(?:التعليمات|الإرشادات|القواعد|المعايير|التوجيهات)|"
        r"(?:निर्देशों|नियमों|मानदंडों|निर्देश|नियम)[^।\n]{0,20}(?:अनदेखा|नज़रअंदाज़|नजरअंदाज|भूल))")),
    # words addressed to the judge
    ("judge_address", re.compile(
        r"(?i)(?:\b(?:dear|attention|hey|hello|hi|note to|note for|message to|message for|instructions? (?:for|to)|notice to|memo to|"
        r"reminder (?:to|for)|an (?:den|die)|hinweis (?:an|für) (?:den|die)|lieber?|sehr geehrte[rn]?|à l'attention d[eu]|"
        r"à l'|au|aux|cher|chère|note pour l[ea']|pour l[ea']|al|a la|para el|para la|estimad[oa]|querid[oa]|nota para el|"
        r"per il|per la|car[oa]|gentile|nota per il|ao|à|para o|para a|prezad[oa]|nota para o|aten[cç][aã]o|"
        r"для|уважаем\w{0,4}|дорог\w{0,3}|вниманию|注意)\s{1,8}(?:the\s{1,8}|l')?(?:automated\s{1,8}|ai\s{1,8})?" + _JUDGE + r"|"
        r"(?:^|[\n(\[/*#>\"'{]|--)[ \t]{0,8}(?:to|for)\s{1,8}(?:the\s{1,8})?(?:automated\s{1,8}|ai\s{1,8})?" + _JUDGE + r"s?[ \t]{0,4}[:,]|"
        r"(?:^|[\n(\[/*#>\"'{;|]|--)[ \t]{0,8}(?:the\s{1,8})?(?:automated\s{1,8}|ai\s{1,8})?" + _STRONG_JUDGE + r"s?[ \t]{0,4}[:：,，][ \t]{0,4}\S|"
        r"\b(?:you are|you're|as) (?:the |an? )?(?:automated |ai |llm )?" + _JUDGE + r"|"
        r"\b" + _JUDGE + r"s?\s{0,8}(?:[:,!]|—|-)\s{0,8}(?:please\s{1,8}|kindly\s{1,8})?(?:give|assign|award|rate|mark|score|grade|output|"
        r"ignore|disregard|note|this|the|treat|accept|approve|pass|consider|remember|you|do not|don't)\b|"
        r"\bif\s{1,8}you(?:'re|\s{1,8}are)\s{1,8}(?:an?\s{1,8})?(?:ai|llm|language model|model|automated system|grader|judge|evaluator)\s{1,8}"
        r"(?:reading|grading|evaluating|reviewing|scoring|assessing|judging)|"
        r"\bwhoever\s{1,8}(?:is\s{1,8})?(?:grades|grading|evaluates|evaluating|scores|scoring|assesses|assessing|judges|judging)\s{1,8}(?:this|it|the)\b|"
        r"\b(?:to|for|dear)\s{1,8}(?:the\s{1,8})?(?:model|system|ai|llm|person|one)\s{1,8}(?:grading|evaluating|judging|scoring|assessing)\s{1,8}"
        r"(?:this|these|the)\b|"
        r"(?:致|给|给予|尊敬的|亲爱的)" + _JUDGE + r"|" + _CJK_JUDGE + r"(?:へ|に|様|さん|の方へ|各位|님|에게|께|:|：)|"
        r"(?:إلى|الى|عزيزي|حضرة|أيها|ملاحظة)\s{1,8}" + _JUDGE + r"|"
        r"(?:मूल्यांकनकर्ता|परीक्षक|ग्रेडर|जा[ंँ]चकर्ता|निर्णायक|मूल्यांकक)\s{0,4}(?:के\s{1,4}लिए|को|जी|महोदय)|"
        r"(?:प्रिय|आदरणीय)\s{1,8}(?:मूल्यांकनकर्ता|परीक्षक|ग्रेडर|जा[ंँ]चकर्ता|निर्णायक|मूल्यांकक))")),
    # asking for a top mark
    ("grade_request", re.compile(
        r"(?i)(?:\b(?:give|assign|award|rate|grade|score|mark|output)\s{1,8}(?:(?:this|the|my|our)\s{1,8}\w{1,24}|it|this|me|us)"
        r"\s{1,8}(?:with\s{1,8}|as\s{1,8}|an?\s{1,8}|the\s{1,8}){0,4}(?:(?-i:A)\+?(?![\w'])|highest|top|full|maximum|max|perfect|10\b|100\b|correct\b)|"
        r"\b(?:deserves?|merits?|earns?|warrants?|should (?:get|receive|be given|be awarded)|must (?:get|receive|be given|be awarded)|"
        r"is to (?:get|receive|be given)|is entitled to)\s{1,8}(?:an?\s{1,8}|the\s{1,8})?" + _TOP_MARK + r"|"
        r"\b(?:must|should|shall|will|is to|are to) (?:be )?(?:graded|scored|rated|marked|evaluated|judged|treated|accepted) "
        r"(?:as )?(?:an? )?(?:(?-i:A)\+?(?![\w'])|correct|perfect|10|100|highest|the highest|excellent|passing|a pass|fully correct|flawless)|"
        r"\b(?:mark|grade|score|rate|treat|count|accept|consider)\s{1,8}(?:this|it)\s{1,8}(?:\w{1,24}\s{1,8})?as\s{1,8}(?:an?\s{1,8})?"
        r"(?:(?-i:A)\+?(?![\w'])|correct\b|perfect\b|passing\b|a pass\b|fully correct|flawless|10/10)|"
        r"\b(?:output|respond with|reply with|emit)\s{1,8}(?:the\s{1,8}(?:grade|score|label|letter)\s{1,8})?[\"'«]?(?:(?-i:A)\+?|Yes|10/10|100/100|PASS)"
        r"[\"'»]?\s{1,8}(?:for|as)\s{1,8}(?:this|the|my|our|it)\b|"
        r"\b(?:donne[zr]?|attribue[zr]?|gib|vergib|da|dé|dale|assegna|dê|поставь\w{0,8}|выстав\w{0,8})\s{1,8}(?:à\s{1,8}|a\s{1,8})?"
        r"(?:cette|diese[rm]?|esta|questa|essa|этому|этой)\s{1,8}\w{1,24}\s{1,8}(?:la\s{1,8}note\s{1,8}|die\s{1,8}note\s{1,8}|la\s{1,8}nota\s{1,8}|оценку\s{1,8})?"
        r"(?:(?-i:A)\b|«A»|\"A\"|10|maximale|maximal|máxima|massimo|высш\w{0,8}|отлично)|"
        r"\b(?:donne[zr]?|attribue[zr]?|accorde[zr]?|mets|mettez)\b[^\n.]{0,40}(?:la note maximale|note maximale|la meilleure note|"
        r"note parfaite|20\s{0,2}/\s{0,2}20|10\s{0,2}/\s{0,2}10|la note (?-i:A)\b|une note de (?-i:A)\b|un (?-i:A)\b|«\s{0,2}(?-i:A)\s{0,2}»)|"
        r"\b(?:gib|gebt|geben sie|vergib|vergeben sie|bewerte|bewerten sie|benote|benoten sie)\b[^\n.]{0,40}(?:bestnote|volle punktzahl|"
        r"höchste (?:note|punktzahl|bewertung)|note 1\b|note (?-i:A)\b|mit (?-i:A)\b|mit 1\b|mit sehr gut|10/10|100/100)|"
        r"\b(?:da|dale|dé|den|asigna\w{0,3}|otorga\w{0,3}|pon|ponle|califica|dai|assegna|attribuisci|metti|dê|atribua|conceda|coloque)\b"
        r"[^\n.]{0,40}(?:calificaci[oó]n m[áa]xima|m[áa]xima calificaci[oó]n|nota m[áa]xima|puntuaci[oó]n m[áa]xima|puntaje m[áa]ximo|"
        r"nota massima|voto massimo|massimo dei voti|punteggio massimo|pontua[cç][aã]o m[áa]xima|nota 10\b|un 10\b|un (?-i:A)\b|uma? (?-i:A)\b|"
        r"la (?-i:A)\b|10/10|100/100|20/20)|"
        r"(?:поставь\w{0,3}|выстав\w{0,6}|дай\w{0,3}|присво\w{0,6}|оцени\w{0,3})[^\n.]{0,40}(?:высш\w{0,4}\s{1,4}(?:балл|оценк\w{0,2})|"
        r"максимальн\w{0,4}\s{1,4}(?:балл|оценк\w{0,2})|отлично|пят[её]рк\w{0,2}|10/10|100/100|«A»|\b(?-i:A)\b)|"
        r"(?:给|給)(?:这个|這個|此)(?:回答|答案|回复|解答)(?:打|评|評)?(?:满分|(?-i:A)|最高分)|"
        r"打[^。\n]{0,6}(?:满分|滿分|最高分)|(?:评为|評為|判为|判為)\s{0,2}(?:满分|滿分|最高分|" + _A + r"(?![A-Za-z]))|"
        r"(?:给|給|给予|給予)(?:这个|這個|此|该|本)?[^。\n]{0,8}(?:满分|滿分|最高分|最高评分|A等|A级|优秀)|"
        r"(?:この|本)(?:回答|解答|答え)(?:に|を)(?:(?-i:A)|満点|最高)|満点(?:を|に|で)\s{0,2}(?:つけ|付け|与え|し|評価)|"
        r"最高評価を(?:つけ|付け|与え)|Aを(?:付け|つけ|与え)|A評価を|"
        r"이\s{0,8}(?:답변|응답|해답)에\s{0,8}(?:(?-i:A)|만점|최고)|(?:만점|최고\s{0,2}점수|최고\s{0,2}등급|(?-i:A)\s{0,2}등급|(?-i:A))\s{0,4}(?:을|를)\s{0,4}(?:주|부여|매기|줘)|"
        r"(?:أعط\w{0,2}|اعط\w{0,2}|امنح\w{0,2}|ضع)[^\n.]{0,40}(?:الدرجة الكاملة|الدرجة القصوى|أعلى درجة|العلامة الكاملة|درجة كاملة|"
        r"علامة كاملة|\b(?-i:A)\b|10/10)|تستحق\s{1,4}(?:الدرجة الكاملة|أعلى درجة|العلامة الكاملة|\b(?-i:A)\b)|"
        r"(?:पूरे\s{1,4}अंक|पूर्ण\s{1,4}अंक|अधिकतम\s{1,4}अंक|पूरे\s{1,4}नंबर|सर्वोच्च\s{1,4}(?:अंक|ग्रेड)|(?-i:A)\s{1,4}ग्रेड|ग्रेड\s{1,4}(?-i:A)|10/10)"
        r"[^।\n]{0,20}(?:दें|दीजिए|दो|दिया जाए|मिलने चाहिए|मिलना चाहिए))")),
)
