package parser

import (
	"strings"
)

// This file decides whether interpreter code (python -c, node -e) only
// reads. It is an allow-list over what the code names, never a list of
// what is known to be bad: every module it imports, every attribute it
// reaches, every built-in it uses must be known to only read or compute.
// A name the language does not predefine is the code's own (or an
// error). Strings are data: a name built from strings can only be used
// through getattr, eval, a computed member and the like, which are not
// allowed.

func words(s string) map[string]bool {
	m := map[string]bool{}
	for _, f := range strings.Fields(s) {
		m[f] = true
	}
	return m
}

// pyTok is one Python token: a name, a string, a number, an operator, or
// a statement end ("\n" for a newline or ;).
type pyTok struct {
	kind byte // 'n' name, 's' string, '0' number, 'o' operator, ';' end
	text string
}

// pyTokens tokenizes Python. The expressions of an f-string become
// tokens of their own, in place. ok is false for what it cannot read.
func pyTokens(s string, depth int) ([]pyTok, bool) {
	if depth > 4 {
		return nil, false
	}
	var out []pyTok
	nest := 0
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && s[i+1] == '\n':
			i += 2
		case c == '\n' || c == ';':
			if nest == 0 {
				out = append(out, pyTok{';', ";"})
			}
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case isWordByte(c) && !(c >= '0' && c <= '9'):
			j := i
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			word := s[i:j]
			if j < len(s) && (s[j] == '\'' || s[j] == '"') && len(word) <= 2 && strings.Trim(strings.ToLower(word), "rbuf") == "" {
				lit, n, ok := pyString(s[j:])
				if !ok {
					return nil, false
				}
				out = append(out, pyTok{'s', lit})
				if strings.ContainsAny(word, "fF") {
					exprs, ok := fstringExprs(lit)
					if !ok {
						return nil, false
					}
					for _, e := range exprs {
						toks, ok := pyTokens(e, depth+1)
						if !ok {
							return nil, false
						}
						for _, t := range toks {
							if t.kind != ';' {
								out = append(out, t)
							}
						}
						out = append(out, pyTok{'o', ","})
					}
				}
				i = j + n
				continue
			}
			out = append(out, pyTok{'n', word})
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			j := i
			for j < len(s) && (isWordByte(s[j]) || s[j] == '.') {
				j++
			}
			out = append(out, pyTok{'0', s[i:j]})
			i = j
		case c == '\'' || c == '"':
			lit, n, ok := pyString(s[i:])
			if !ok {
				return nil, false
			}
			out = append(out, pyTok{'s', lit})
			i += n
		case c >= 0x80 || c == '\\' || c == '`':
			// A name may be spelt with other characters (ｅｖａｌ is
			// eval once normalised); not read.
			return nil, false
		default:
			switch c {
			case '(', '[', '{':
				nest++
			case ')', ']', '}':
				nest--
			}
			out = append(out, pyTok{'o', s[i : i+1]})
			i++
		}
	}
	return out, true
}

// pyString reads a string literal at the start of s (after any prefix):
// its body and its length.
func pyString(s string) (string, int, bool) {
	q := s[:1]
	if strings.HasPrefix(s, q+q+q) {
		q = q + q + q
	}
	for j := len(q); j < len(s); j++ {
		if s[j] == '\\' {
			j++
			continue
		}
		if len(q) == 1 && s[j] == '\n' {
			return "", 0, false
		}
		if strings.HasPrefix(s[j:], q) {
			return s[len(q):j], j + len(q), true
		}
	}
	return "", 0, false
}

// fstringExprs returns the expressions of an f-string's body, without
// their conversions and format specs.
func fstringExprs(body string) ([]string, bool) {
	var out []string
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '{':
			if i+1 < len(body) && body[i+1] == '{' {
				i++
				continue
			}
			depth, j := 0, i+1
			cut := -1
			for ; j < len(body); j++ {
				ch := body[j]
				if ch == '(' || ch == '[' || ch == '{' {
					depth++
				} else if ch == ')' || ch == ']' || ch == '}' {
					if depth == 0 {
						break
					}
					depth--
				} else if depth == 0 && cut < 0 && (ch == ':' || ch == '!' && (j+1 >= len(body) || body[j+1] != '=')) {
					cut = j
				}
			}
			if j >= len(body) {
				return nil, false
			}
			if cut < 0 {
				cut = j
			}
			out = append(out, body[i+1:cut])
			// A format spec may hold expressions too: {x:{width}}.
			if spec := body[cut:j]; strings.Contains(spec, "{") {
				inner, ok := fstringExprs(spec + "}")
				if !ok {
					return nil, false
				}
				out = append(out, inner...)
			}
			i = j
		}
	}
	return out, true
}

// pyDanger returns why Python code may change something, or "" when it
// is proven to only read.
func pyDanger(code string) string {
	toks, ok := pyTokens(code, 0)
	if !ok {
		return "cannot be read"
	}
	// alias → module, for the names imports bind.
	mods := map[string]string{}
	pathlib := false
	start := true
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.kind == ';' {
			start = true
			continue
		}
		if start && t.kind == 'n' && (t.text == "import" || t.text == "from") {
			n, reason := pyImport(toks[i:], mods)
			if reason != "" {
				return reason
			}
			i += n - 1
			continue
		}
		start = false
	}
	pathlib = strings.Contains(code, "pathlib")
	start = true
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.kind == ';' {
			start = true
			continue
		}
		if start && t.kind == 'n' && (t.text == "import" || t.text == "from") {
			for i < len(toks) && toks[i].kind != ';' {
				i++
			}
			start = true
			continue
		}
		start = false
		if t.kind != 'n' {
			continue
		}
		attr := i > 0 && toks[i-1].kind == 'o' && toks[i-1].text == "."
		switch {
		case attr:
			recv := ""
			if i > 1 && toks[i-2].kind == 'n' && (i < 3 || toks[i-3].text != ".") {
				recv = mods[toks[i-2].text]
			}
			if !pyAttrAllowed(recv, t.text) || t.text == "replace" && pathlib {
				return "uses ." + t.text
			}
		case t.text == "case" && i > 0 && toks[i-1].kind == ';':
			// A class pattern reads attributes by keyword: case
			// object(system=f).
			return "uses a match statement"
		case pyKeywords[t.text]:
		case mods[t.text] != "":
			if m := mods[t.text]; pyModuleRules[m] != nil && (i+1 >= len(toks) || toks[i+1].text != ".") {
				return "uses the module " + m + " as a value"
			}
		case t.text == "open":
			if reason := pyOpen(toks[i+1:]); reason != "" {
				return reason
			}
		case strings.HasPrefix(t.text, "__") && strings.HasSuffix(t.text, "__"):
			if !pyDunders[t.text] {
				return "uses " + t.text
			}
		case pyBuiltins[t.text] && !pySafeBuiltins[t.text]:
			return "uses " + t.text
		}
	}
	return ""
}

// pyImport reads one import statement at toks, binding the names it
// binds in mods, and returns how many tokens it took, or why it may
// change something.
func pyImport(toks []pyTok, mods map[string]string) (int, string) {
	n := 0
	for n < len(toks) && toks[n].kind != ';' {
		n++
	}
	st := toks[:n]
	dotted := func(k int) (string, int) {
		var b strings.Builder
		for k < len(st) && (st[k].kind == 'n' || st[k].text == ".") && st[k].text != "import" && st[k].text != "as" {
			b.WriteString(st[k].text)
			k++
		}
		return b.String(), k
	}
	if st[0].text == "import" {
		for k := 1; k < len(st); {
			mod, next := dotted(k)
			if mod == "" || !pySafeModules[mod] {
				return n, "imports " + mod
			}
			alias, _, _ := strings.Cut(mod, ".")
			bound := alias
			if next+1 < len(st) && st[next].text == "as" {
				alias, bound = st[next+1].text, mod
				next += 2
			}
			mods[alias] = bound
			if next < len(st) && st[next].text != "," {
				return n, "imports in a form the parser does not read"
			}
			k = next + 1
		}
		return n, ""
	}
	mod, k := dotted(1)
	if mod == "" || strings.HasPrefix(mod, ".") || !pySafeModules[mod] || k >= len(st) || st[k].text != "import" {
		return n, "imports from " + mod
	}
	for k++; k < len(st); k++ {
		t := st[k]
		switch {
		case t.text == "(" || t.text == ")" || t.text == ",":
		case t.kind == 'n' && t.text != "as":
			if !pyAttrAllowed(mod, t.text) {
				return n, "imports " + mod + "." + t.text
			}
			alias := t.text
			if k+2 < len(st) && st[k+1].text == "as" {
				alias = st[k+2].text
				k += 2
			}
			if pySafeModules[mod+"."+t.text] {
				mods[alias] = mod + "." + t.text
			} else {
				delete(mods, alias)
			}
		default:
			return n, "imports " + mod + " " + t.text // from m import *
		}
	}
	return n, ""
}

// pyOpen checks a use of open: it must be called, with a mode (second
// argument or mode=) that is a literal without w, a, x or +, and no
// opener.
func pyOpen(rest []pyTok) string {
	if len(rest) == 0 || rest[0].text != "(" {
		return "uses open other than by calling it"
	}
	depth, arg := 0, 0
	for k := 0; k < len(rest); k++ {
		t := rest[k]
		switch t.text {
		case "(", "[", "{":
			depth++
			continue
		case ")", "]", "}":
			depth--
			if depth == 0 {
				return ""
			}
			continue
		case ",":
			if depth == 1 {
				arg++
			}
			continue
		}
		if depth != 1 {
			continue
		}
		keyword := t.kind == 'n' && k+1 < len(rest) && rest[k+1].text == "=" && (k+2 >= len(rest) || rest[k+2].text != "=")
		switch {
		case keyword && t.text == "mode":
			if k+2 >= len(rest) || !pyReadMode(rest[k+2]) {
				return "opens a file in a mode that may write"
			}
			k += 2
		case keyword && (t.text == "opener" || t.text == "file"):
			if t.text == "opener" {
				return "opens a file with an opener"
			}
		case keyword:
			k++
		case arg == 1 && (rest[k-1].text == "," || rest[k-1].text == "("):
			if !pyReadMode(t) || k+1 < len(rest) && rest[k+1].text != "," && rest[k+1].text != ")" {
				return "opens a file in a mode that may write"
			}
		case arg > 1 && rest[k-1].text == ",":
			// buffering, encoding, errors, newline, closefd: positional
			// arguments after the mode.
			if arg == 5 && !(t.text == "True" || t.text == "False") {
				return "opens a file with an opener"
			}
		}
	}
	return "opens a file in a form the parser does not read"
}

func pyReadMode(t pyTok) bool {
	return t.kind == 's' && strings.Trim(t.text, "rbtU") == ""
}

// pyAttrAllowed reports whether an attribute may be reached on an object
// (module is the module it is reached on, when known).
func pyAttrAllowed(module, name string) bool {
	if rules, ok := pyModuleRules[module]; ok {
		return rules[name]
	}
	if strings.HasPrefix(name, "__") {
		return pyDunders[name]
	}
	return pyAttrs[name]
}

var pySafeModules = words(`sys json re os os.path posixpath math platform datetime time collections
collections.abc itertools functools string textwrap pprint base64 hashlib struct random statistics
decimal fractions glob fnmatch pathlib typing dataclasses enum uuid shlex tomllib sysconfig locale
unicodedata binascii zlib csv operator html difflib calendar ast keyword numbers bisect heapq copy
yaml toml secrets ipaddress colorsys importlib.metadata email.utils urllib.parse getpass __future__
contextlib warnings`)

// pyModuleRules are the attributes allowed on modules that also hold
// attributes that write or run code under names other objects use for
// harmless things (os.remove, yaml.load).
var pyModuleRules = map[string]map[string]bool{
	"os": words(`path environ environb getcwd getcwdb listdir sep getenv walk stat name cpu_count getpid
getppid linesep pathsep scandir lstat access uname getuid geteuid getgid getegid getgroups getlogin
R_OK W_OK X_OK F_OK devnull curdir pardir extsep altsep get_terminal_size fspath fsencode fsdecode
strerror isatty readlink getloadavg urandom sched_getaffinity supports_follow_symlinks error`),
	"yaml": words(`safe_load safe_load_all safe_dump safe_dump_all dump dump_all YAMLError SafeLoader
CSafeLoader SafeDumper __version__`),
	"pathlib": words(`Path PurePath PosixPath PurePosixPath`),
}

var pyKeywords = words(`False None True and as assert async await break class continue def del elif
else except finally for global if import in is lambda nonlocal not or pass raise return try while
with yield match case print_function`)

var pyDunders = words(`__name__ __doc__ __file__ __init__ __str__ __repr__ __eq__ __ne__ __lt__ __le__
__gt__ __ge__ __hash__ __len__ __iter__ __next__ __getitem__ __contains__ __enter__ __exit__ __call__
__post_init__ __add__ __bool__ __version__ __all__ __slots__ __main__ __future__ __debug__`)

// pyBuiltins is every name Python predefines (3.13's dir(builtins));
// pySafeBuiltins are those that only compute, print or read.
var pyBuiltins = words(`ArithmeticError AssertionError AttributeError BaseException BaseExceptionGroup
BlockingIOError BrokenPipeError BufferError BytesWarning ChildProcessError ConnectionAbortedError
ConnectionError ConnectionRefusedError ConnectionResetError DeprecationWarning EOFError Ellipsis
EncodingWarning EnvironmentError Exception ExceptionGroup False FileExistsError FileNotFoundError
FloatingPointError FutureWarning GeneratorExit IOError ImportError ImportWarning IndentationError
IndexError InterruptedError IsADirectoryError KeyError KeyboardInterrupt LookupError MemoryError
ModuleNotFoundError NameError None NotADirectoryError NotImplemented NotImplementedError OSError
OverflowError PendingDeprecationWarning PermissionError ProcessLookupError PythonFinalizationError
RecursionError ReferenceError ResourceWarning RuntimeError RuntimeWarning StopAsyncIteration
StopIteration SyntaxError SyntaxWarning SystemError SystemExit TabError TimeoutError True TypeError
UnboundLocalError UnicodeDecodeError UnicodeEncodeError UnicodeError UnicodeTranslateError
UnicodeWarning UserWarning ValueError Warning ZeroDivisionError _IncompleteInputError abs aiter all
anext any ascii bin bool breakpoint bytearray bytes callable chr classmethod compile complex copyright
credits delattr dict dir divmod enumerate eval exec exit filter float format frozenset getattr globals
hasattr hash help hex id input int isinstance issubclass iter len license list locals map max
memoryview min next object oct open ord pow print property quit range repr reversed round set setattr
slice sorted staticmethod str sum super tuple type vars zip`)

var pySafeBuiltins = func() map[string]bool {
	m := words(`False None True Ellipsis NotImplemented abs aiter all anext any ascii bin bool bytearray
bytes callable chr classmethod complex dict dir divmod enumerate exit filter float format frozenset
hasattr hash hex id input int isinstance issubclass iter len list map max memoryview min next object
oct ord pow print property quit range repr reversed round set slice sorted staticmethod str sum super
tuple type zip`)
	for b := range pyBuiltins {
		if strings.HasSuffix(b, "Error") || strings.HasSuffix(b, "Exception") || strings.HasSuffix(b, "Warning") ||
			strings.HasSuffix(b, "Group") || strings.HasSuffix(b, "Iteration") || strings.HasSuffix(b, "Exit") ||
			strings.HasSuffix(b, "Interrupt") {
			m[b] = true
		}
	}
	return m
}()

// pyAttrs are attributes that only read or compute, on any object.
// Names that write or run code on some object (write_text, unlink,
// system, rename, popen, __class__, __globals__, attrgetter,
// import_module, modules) are not here; replace, which renames a path,
// is allowed only while pathlib is not imported and os is reached as a
// module only.
var pyAttrs = words(`
split rsplit strip lstrip rstrip join format format_map startswith endswith lower upper title capitalize
casefold swapcase find rfind index rindex count replace partition rpartition splitlines encode decode
isdigit isalpha isalnum isspace isupper islower isidentifier isnumeric isdecimal isprintable istitle
isascii center ljust rjust zfill expandtabs translate maketrans removeprefix removesuffix hex fromhex
append extend insert pop remove clear sort reverse copy keys values items get setdefault update popitem
fromkeys add discard union intersection difference symmetric_difference issubset issuperset isdisjoint
real imag conjugate bit_length bit_count to_bytes from_bytes is_integer as_integer_ratio numerator
denominator
argv stdin stdout stderr version version_info platform executable maxsize byteorder prefix base_prefix
exec_prefix exit getsizeof getrecursionlimit flags implementation hexversion float_info maxunicode
getdefaultencoding getfilesystemencoding exc_info api_version major minor micro releaselevel serial
write writelines flush buffer encoding errors isatty fileno reconfigure read readline readlines seek
tell close closed mode line_buffering newlines
path abspath realpath relpath dirname basename splitext exists isfile isdir islink expanduser expandvars
getsize getmtime getctime getatime normpath commonpath commonprefix samefile ismount isabs normcase
lexists sep
Path PurePath PosixPath PurePosixPath parent parents name stem suffix suffixes parts is_file is_dir
is_symlink is_absolute is_relative_to iterdir glob rglob read_text read_bytes resolve absolute
relative_to with_suffix with_name with_stem joinpath stat home cwd match as_posix as_uri anchor drive
root owner group lstat walk
st_size st_mtime st_mode st_uid st_gid st_ino st_nlink st_atime st_ctime st_dev st_mtime_ns
is_junction inode
datetime date time timedelta timezone now utcnow today fromtimestamp utcfromtimestamp fromisoformat
strptime strftime isoformat timestamp year month day hour minute second microsecond weekday isoweekday
isocalendar total_seconds days seconds microseconds tzinfo astimezone utc combine min max resolution
ctime timetuple toordinal fromordinal tzname utcoffset dst monotonic perf_counter time_ns sleep
localtime gmtime asctime mktime process_time monotonic_ns perf_counter_ns
load loads dumps dump JSONDecodeError
compile search fullmatch findall finditer sub subn escape group groups groupdict start end span
IGNORECASE I M S X A MULTILINE DOTALL VERBOSE ASCII UNICODE pattern lastindex string pos endpos
Counter defaultdict OrderedDict namedtuple deque ChainMap most_common elements total
chain groupby islice cycle repeat product permutations combinations combinations_with_replacement
accumulate zip_longest starmap takewhile dropwhile pairwise from_iterable batched compress filterfalse
reduce partial lru_cache cache wraps cmp_to_key total_ordering cached_property singledispatch
ascii_letters ascii_lowercase ascii_uppercase digits hexdigits octdigits punctuation whitespace
printable Template capwords substitute safe_substitute
dedent indent wrap fill shorten
pprint pformat pp isreadable saferepr
b64encode b64decode urlsafe_b64encode urlsafe_b64decode b32encode b32decode b16encode b16decode
a85encode a85decode b85encode b85decode encodebytes decodebytes standard_b64encode standard_b64decode
md5 sha1 sha224 sha256 sha384 sha512 sha3_256 sha3_512 blake2b blake2s new hexdigest digest
file_digest algorithms_available algorithms_guaranteed digest_size block_size
pack unpack calcsize unpack_from iter_unpack
random randint choice choices shuffle sample uniform seed randrange gauss getrandbits randbytes
mean median mode stdev variance pstdev pvariance quantiles fmean geometric_mean harmonic_mean
median_low median_high multimode
Decimal Fraction getcontext quantize
iglob fnmatch filter fnmatchcase translate
Any List Dict Optional Union Tuple Set Iterable Iterator Callable TypeVar Generic cast NamedTuple
TypedDict Literal Sequence Mapping
dataclass field asdict astuple fields Enum IntEnum StrEnum Flag IntFlag auto value
uuid4 uuid1 uuid3 uuid5 UUID urn bytes int
quote
get_paths get_path get_config_var get_config_vars get_platform get_python_version get_scheme_names
getlocale getpreferredencoding getencoding setlocale LC_ALL localeconv
category normalize lookup bidirectional combining east_asian_width numeric decimal digit
hexlify unhexlify crc32 crc_hqx b2a_hex a2b_hex b2a_base64 a2b_base64 adler32 decompressobj compressobj
decompress compress
reader DictReader writer DictWriter writerow writerows writeheader Sniffer field_size_limit sniff
has_header QUOTE_ALL QUOTE_MINIMAL QUOTE_NONE QUOTE_NONNUMERIC excel excel_tab unix_dialect fieldnames
line_num dialect delimiter quotechar
itemgetter mul truediv floordiv neg not_ contains eq ne lt le gt ge and_ or_ xor concat
unescape
unified_diff ndiff SequenceMatcher get_close_matches ratio context_diff get_opcodes quick_ratio
HtmlDiff make_file make_table get_matching_blocks
month_name month_abbr day_name day_abbr monthrange isleap leapdays monthcalendar weekheader
literal_eval parse unparse iter_child_nodes NodeVisitor Name Call Constant FunctionDef ClassDef body
lineno col_offset id args
kwlist iskeyword softkwlist
bisect bisect_left bisect_right insort insort_left insort_right
heappush heappop heapify nlargest nsmallest heappushpop heapreplace merge
deepcopy
safe_load safe_load_all safe_dump YAMLError
token_hex token_urlsafe token_bytes randbelow compare_digest
ip_address ip_network ip_interface IPv4Address IPv6Address IPv4Network IPv6Network is_private
is_loopback is_global is_multicast hosts subnets supernet prefixlen netmask network_address
broadcast_address exploded compressed
rgb_to_hsv hsv_to_rgb rgb_to_hls hls_to_rgb
metadata distributions distribution entry_points packages_distributions requires files
parseaddr formataddr parsedate parsedate_to_datetime format_datetime getaddresses formatdate
urlparse urlsplit urlunparse urlunsplit urljoin unquote quote_plus unquote_plus urlencode parse_qs
parse_qsl urldefrag scheme netloc hostname port query fragment params username password geturl
getuser
floor ceil sqrt log log2 log10 log1p exp expm1 pow pi e tau inf nan isnan isinf isfinite fsum prod
gcd lcm comb perm factorial sin cos tan asin acos atan atan2 sinh cosh tanh hypot trunc isclose dist
fabs modf copysign fmod frexp ldexp degrees radians isqrt ulp nextafter
warn filterwarnings simplefilter catch_warnings resetwarnings
suppress contextmanager closing ExitStack nullcontext
annotations division absolute_import unicode_literals
system machine node release processor architecture python_version python_implementation
python_version_tuple mac_ver libc_ver freedesktop_os_release uname_result
getcwd listdir environ getenv scandir cpu_count getpid uname
`)

// nodeGlobals is every name Node predefines in -e code (its globals and
// the built-in modules it binds); nodeSafeGlobals are those that only
// compute, print or read.
var nodeGlobals = words(`Object Function Array Number parseFloat parseInt Infinity NaN undefined Boolean
String Symbol Date Promise RegExp Error AggregateError EvalError RangeError ReferenceError SyntaxError
TypeError URIError globalThis JSON Math Intl ArrayBuffer Uint8Array Int8Array Uint16Array Int16Array
Uint32Array Int32Array Float32Array Float64Array Uint8ClampedArray BigUint64Array BigInt64Array
DataView Map BigInt Set WeakMap WeakSet Proxy Reflect FinalizationRegistry WeakRef decodeURI
decodeURIComponent encodeURI encodeURIComponent escape unescape eval isFinite isNaN console process
global Buffer clearImmediate setImmediate URL URLSearchParams DOMException AbortController AbortSignal
Event EventTarget TextEncoder TextDecoder TransformStream TransformStreamDefaultController
WritableStream WritableStreamDefaultController WritableStreamDefaultWriter ReadableStream
ReadableStreamDefaultReader ReadableStreamBYOBReader ReadableStreamBYOBRequest
ReadableByteStreamController ReadableStreamDefaultController ByteLengthQueuingStrategy
CountQueuingStrategy TextEncoderStream TextDecoderStream CompressionStream DecompressionStream
clearInterval clearTimeout setInterval setTimeout queueMicrotask structuredClone atob btoa
BroadcastChannel MessageChannel MessagePort MessageEvent Blob File Performance PerformanceEntry
PerformanceMark PerformanceMeasure PerformanceObserver PerformanceObserverEntryList
PerformanceResourceTiming performance fetch FormData Headers Request Response SharedArrayBuffer
Atomics WebAssembly crypto Crypto CryptoKey SubtleCrypto CustomEvent WebSocket Navigator navigator
Iterator localStorage sessionStorage Storage EventSource assert async_hooks buffer child_process
cluster constants dgram diagnostics_channel dns domain events fs http http2 https inspector net os
path perf_hooks punycode querystring readline repl stream string_decoder sys timers tls trace_events
tty url util v8 vm wasi worker_threads zlib sqlite test module_ __filename module exports __dirname
require arguments import`)

var nodeSafeGlobals = words(`Array Number parseFloat parseInt Infinity NaN undefined Boolean String Symbol
Date Promise RegExp Error AggregateError EvalError RangeError ReferenceError SyntaxError TypeError
URIError JSON Math Intl Map BigInt Set WeakMap WeakSet decodeURI decodeURIComponent encodeURI
encodeURIComponent isFinite isNaN console process Buffer URL URLSearchParams TextEncoder TextDecoder
structuredClone atob btoa Object Uint8Array fs path os util url __filename __dirname require`)

// nodeSafeModules are the modules require may load.
var nodeSafeModules = words(`fs path os util url assert fs/promises node:fs node:path node:os node:util
node:url node:assert node:fs/promises`)

var nodeKeywords = words(`const let var function return if else for while do break continue new typeof
instanceof in of delete try catch finally throw class extends super this null true false async await
yield switch case default void static get set`)

// nodeAttrs are members that only read or compute, on any object. fs's
// writing calls (writeFileSync, rmSync, …), child_process's, process's
// binding, dlopen, mainModule and the like, and constructor and
// __proto__, which reach the Function constructor, are not here.
var nodeAttrs = words(`
log error warn info debug table dir trace time timeEnd group groupEnd count assert
parse stringify keys values entries assign freeze fromEntries getOwnPropertyNames hasOwn
hasOwnProperty isArray from of isInteger isFinite isNaN isSafeInteger MAX_SAFE_INTEGER EPSILON
floor ceil round abs max min pow sqrt random trunc sign log2 log10 PI E cbrt hypot
length map filter reduce reduceRight forEach find findIndex findLast findLastIndex some every includes
indexOf lastIndexOf join slice splice concat push pop shift unshift sort reverse flat flatMap fill
at toSorted toReversed with
split trim trimStart trimEnd toUpperCase toLowerCase startsWith endsWith replace replaceAll padStart
padEnd repeat charAt charCodeAt codePointAt substring substr match matchAll search localeCompare
normalize toString toFixed toPrecision valueOf toJSON toISOString getTime getFullYear getMonth
getDate getDay getHours getMinutes getSeconds now toLocaleString toLocaleDateString
toLocaleTimeString toDateString toUTCString test exec source flags lastIndex
get has size add set delete clear
argv env cwd platform version versions arch pid ppid exitCode uptime hrtime memoryUsage release
execPath stdout stderr stdin isTTY columns rows write exit bigint node v8
readFileSync readdirSync existsSync statSync lstatSync realpathSync accessSync readFile readdir stat
lstat realpath access promises constants isFile isDirectory isSymbolicLink mtime mtimeMs ctime size
mode uid gid name parentPath
join resolve dirname basename extname relative normalize isAbsolute sep delimiter posix parse format
root dir base ext
homedir hostname tmpdir cpus totalmem freemem type userInfo EOL endianness loadavg networkInterfaces
inspect format isDeepStrictEqual types promisify
equal strictEqual deepEqual deepStrictEqual notEqual ok
fileURLToPath pathToFileURL href protocol host pathname search hash origin searchParams port
username
dependencies devDependencies peerDependencies scripts main type engines workspaces exports bin
then catch finally all allSettled race any
toString byteLength alloc concat compare subarray readUInt32LE
`)

// jsTok reuses [jsTokens]'s tokens with template literals read too.

// nodeDanger returns why JavaScript code may change something, or "" when
// it is proven to only read.
func nodeDanger(code string) string {
	toks, ok := nodeTokens(code, 0)
	if !ok {
		return "cannot be read"
	}
	// fs and process hold calls that write or run code: they may be
	// used only by naming a member, never as values (Object.values(fs),
	// const {writeFileSync} = fs), so that every call on them is named.
	holders := map[string]bool{"fs": true, "process": true}
	for i := 0; i+5 < len(toks); i++ {
		if toks[i+1] == "=" && toks[i+2] == "require" && toks[i+3] == "(" && isJSString(toks[i+4]) && isJSIdent(toks[i]) {
			if mod := toks[i+4][1 : len(toks[i+4])-1]; strings.Contains(mod, "fs") {
				holders[toks[i]] = true
			}
		}
	}
	for i, t := range toks {
		if holders[t] && (i == 0 || toks[i-1] != ".") && !(i+1 < len(toks) && toks[i+1] == "=") {
			if i+2 >= len(toks) || toks[i+1] != "." || toks[i+2] == "promises" && (i+3 >= len(toks) || toks[i+3] != ".") {
				return "uses " + t + " as a value"
			}
		}
		if t == "require" && i+4 < len(toks) && strings.Contains(toks[i+2], "fs") && toks[i+4] != "." && (i < 2 || toks[i-1] != "=" || !holders[toks[i-2]]) {
			return "uses the fs module as a value"
		}
		if !isJSIdent(t) || isJSNumber(t) {
			if t == "[" && i > 0 && nodeValueEnd(toks[i-1]) {
				// A computed member: only a literal index or a literal
				// name that is itself allowed.
				if i+2 >= len(toks) || toks[i+2] != "]" {
					return "uses a computed member"
				}
				k := toks[i+1]
				if !isJSNumber(k) && !(isJSString(k) && nodeAttrs[k[1:len(k)-1]]) {
					return "uses a computed member " + k
				}
			}
			continue
		}
		prev := ""
		if i > 0 {
			prev = toks[i-1]
		}
		switch {
		case prev == ".":
			if !nodeAttrs[t] {
				return "uses ." + t
			}
		case t == "with" || t == "import" || t == "eval" || t == "debugger" || t == "this":
			return "uses " + t
		case nodeKeywords[t]:
		case t == "require":
			if i+3 >= len(toks) || toks[i+1] != "(" || !isJSString(toks[i+2]) || toks[i+3] != ")" {
				return "requires a module named at run time"
			}
			mod := toks[i+2][1 : len(toks[i+2])-1]
			if !nodeSafeModules[mod] && !strings.HasSuffix(mod, ".json") {
				return "requires " + mod
			}
		case nodeGlobals[t] && !nodeSafeGlobals[t]:
			return "uses " + t
		}
	}
	return ""
}

// nodeValueEnd reports whether a token ends a value, so that a [ after it
// is a member access rather than an array.
func nodeValueEnd(t string) bool {
	return t == ")" || t == "]" || isJSString(t) || isJSIdent(t) && !nodeKeywords[t] || t == "}"
}

// nodeTokens is [jsTokens] that also reads template literals: their
// text becomes a string token and each ${…} expression tokens of its own.
func nodeTokens(s string, depth int) ([]string, bool) {
	if depth > 4 {
		return nil, false
	}
	var out []string
	for {
		i := strings.IndexByte(s, '`')
		if i < 0 {
			toks, ok := jsTokens(s)
			return append(out, dropNL(toks)...), ok
		}
		toks, ok := jsTokens(s[:i])
		if !ok {
			return nil, false
		}
		out = append(out, dropNL(toks)...)
		// Read the template: its text, and each ${…} to its matching }.
		j := i + 1
		out = append(out, `""`)
		for ; j < len(s) && s[j] != '`'; j++ {
			switch {
			case s[j] == '\\':
				j++
			case s[j] == '$' && j+1 < len(s) && s[j+1] == '{':
				d, k := 0, j+2
				for ; k < len(s); k++ {
					if s[k] == '{' {
						d++
					} else if s[k] == '}' {
						if d == 0 {
							break
						}
						d--
					}
				}
				if k >= len(s) {
					return nil, false
				}
				inner, ok := nodeTokens(s[j+2:k], depth+1)
				if !ok {
					return nil, false
				}
				out = append(out, "(")
				out = append(out, inner...)
				out = append(out, ")")
				j = k
			}
		}
		if j >= len(s) {
			return nil, false
		}
		s = s[j+1:]
	}
}

func dropNL(toks []string) []string {
	out := toks[:0]
	for _, t := range toks {
		if t != "\n" {
			out = append(out, t)
		}
	}
	return out
}
