# undosh's hooks for an interactive bash on its PTY (docs/interactive.md).
#
# bash starts as it would without undosh: the same command line, the same
# start-up files. undosh adds three variables to its environment:
# PROMPT_COMMAND=__undosh_boot, a PS0 that calls it too, and the exported
# function __undosh_boot, which sources this file. The first prompt runs
# it, after every start-up file, and it installs the hooks below and
# removes all three. If a start-up file replaced PROMPT_COMMAND, PS0 runs
# it when the first line is read: "pre" protects that line from a command
# substitution and arms PROMPT_COMMAND to install the hooks at the next
# prompt.
#
# The side channel: two named pipes in a private directory, opened only
# for the length of one message, so that no command ever inherits them.
# A message is a kind and fields, each ended by a NUL; a reply is an id
# and an action. undosh holds both pipes open for reading and writing, so
# opening them never blocks, and an answer nobody read (its reader was
# interrupted) is skipped by the next reader, whose id differs.
#
#   PS0 (after a line is read, before any of it runs): a command
#   substitution, __undosh_pre, sends the line (from history), the working
#   directory, and the exported variables, and waits while undosh
#   classifies the line and checkpoints what it may change. When the line
#   must not run here (refused, or run in a copy of the machine), it
#   interrupts the shell, which drops the whole line; a line that ran in
#   a copy and ended with `exit` there ends the shell at the next prompt.
#   PROMPT_COMMAND (before the next prompt): __undosh_post sends the
#   line's exit status and waits while undosh rolls back a failed line.
#
# Each hook re-arms the other: PS0 puts __undosh_post back into
# PROMPT_COMMAND (at index 99, which `PROMPT_COMMAND=...` leaves alone),
# and __undosh_post puts undosh's part back in front of PS0.
#
# undosh writes __undosh_dir=DIR above this text.

# __undosh_send KIND FIELD...: one message to undosh.
__undosh_send() {
	builtin printf '%s\0' "$@" >"$__undosh_dir/req"
}

# __undosh_wait ID: undosh's answer to message ID, in __undosh_a.
__undosh_wait() {
	local n
	__undosh_a=
	while IFS= builtin read -r -d '' n && IFS= builtin read -r -d '' __undosh_a; do
		[[ $n == "$1" ]] && return 0
	done <"$__undosh_dir/rep"
	return 1
}

# __undosh_pre STATUS: runs in PS0's command substitution, once the line
# has been read and before any of it runs. STATUS is the previous line's.
# It prints 1 when the line's end must be reported (PS0 keeps that in
# __undosh_line for __undosh_post).
__undosh_pre() {
	local id=p$BASHPID
	{
		builtin printf 'begin\0%s\0%s\0%s\0%s\0%s\0%s\0%s\0%s\0' "$id" "$1" "$PWD" "$__undosh_hcu" "$__undosh_hiu" "$__undosh_hon" "$__undosh_hsu" "$__undosh_forced"
		HISTTIMEFORMAT= builtin history 1
		builtin printf '\0'
		builtin export -p
		builtin printf '\0'
	} >"$__undosh_dir/req" 2>/dev/null
	__undosh_wait "$id" || return 0
	case $__undosh_a in
	end) builtin printf 1 ;;
	skip) builtin kill -INT $$ ;;
	exit:*)
		# The line ran in a copy of the machine and ended its shell
		# there (`…; exit 3`): the shell drops it, and __undosh_post
		# exits with its status before the next prompt.
		builtin printf '%s' "${__undosh_a#exit:}" >"$__undosh_dir/exit"
		builtin kill -INT $$
		;;
	esac
}

# __undosh_post [STATUS]: runs from PROMPT_COMMAND before each prompt;
# STATUS is the line's ($? by default).
__undosh_post() {
	local s=${1-$?} id
	if [[ -s $__undosh_dir/exit ]]; then
		IFS= builtin read -r s <"$__undosh_dir/exit"
		: >"$__undosh_dir/exit"
		builtin exit "$s"
	fi
	if [[ -n ${__undosh_line-} ]]; then
		__undosh_line=
		id=e$((++__undosh_seq))
		__undosh_send end "$id" "$s" 2>/dev/null
		if __undosh_wait "$id"; then
			if [[ $__undosh_a == cd+* ]]; then
				# A mount now covers the directory the shell is in:
				# enter it again, as if nothing happened.
				__undosh_a=${__undosh_a#cd+}
				local o=${OLDPWD-}
				builtin cd -- "$PWD" 2>/dev/null
				OLDPWD=$o
			fi
			if [[ $__undosh_a == forget:* ]]; then
				builtin history -d "${__undosh_a#forget:}" 2>/dev/null || :
			fi
		fi
	fi
	__undosh_arm
}

# __undosh_arm makes sure the next line reaches history, where
# __undosh_pre reads it: it keeps what would keep the line out
# (ignorespace and ignoredups in HISTCONTROL, HISTIGNORE, HISTSIZE=0)
# aside while the line is read, puts back from PS0 what it can before the
# line runs, and sends undosh the user's settings, which undosh applies
# itself once the line ends. Then it puts undosh's part
# back in front of PS0.
__undosh_arm() {
	local w r= restore= ran=${__undosh_ran-}
	__undosh_ran=
	# A setting is the user's, unless it still holds what undosh left
	# there for the last line: what it set, or what PS0 put back.
	if [[ -n $ran && -n $__undosh_hcb ]]; then w=$__undosh_hcu; else w=$__undosh_hcs; fi
	if [[ ${HISTCONTROL-} != "$w" ]]; then __undosh_hcu=${HISTCONTROL-}; fi
	if [[ -n $ran && -n $__undosh_hib ]]; then w=$__undosh_hiu; else w=$__undosh_his; fi
	if [[ ${HISTIGNORE-} != "$w" ]]; then __undosh_hiu=${HISTIGNORE-}; fi
	if [[ -n $ran && -n $__undosh_hsb ]]; then w=$__undosh_hsu; else w=$__undosh_hss; fi
	if [[ ${HISTSIZE-} != "$w" ]]; then __undosh_hsu=${HISTSIZE-}; fi
	# set +o history cannot be undone from here: bash puts it back once
	# PROMPT_COMMAND has run. A line read with it on is not in history.
	__undosh_hon=0
	[[ -o history ]] && __undosh_hon=1

	__undosh_hcb=
	case :$__undosh_hcu: in
	*:ignorespace:* | *:ignoredups:* | *:ignoreboth:*)
		local IFS=:
		for w in $__undosh_hcu; do
			case $w in ignorespace | ignoredups | ignoreboth) ;; *) r+=${r:+:}$w ;; esac
		done
		HISTCONTROL=$r
		# Only an empty value can be put back (with :=).
		if [[ -z $r ]]; then
			restore+='${__undosh_A[x${HISTCONTROL:=$__undosh_hcu}]}'
			__undosh_hcb=1
		fi
		;;
	esac
	__undosh_hcs=${HISTCONTROL-}
	__undosh_hib=
	if [[ -n $__undosh_hiu ]]; then
		HISTIGNORE=
		restore+='${__undosh_A[x${HISTIGNORE:=$__undosh_hiu}]}'
		__undosh_hib=1
	fi
	__undosh_his=${HISTIGNORE-}
	__undosh_hsb=
	if [[ $__undosh_hsu == 0 ]]; then
		HISTSIZE=
		restore+='${__undosh_A[x${HISTSIZE:=$__undosh_hsu}]}'
		__undosh_hsb=1
	fi
	__undosh_hss=${HISTSIZE-}

	if [[ -n $__undosh_ps0p && ${PS0-} == "$__undosh_ps0p"* ]]; then
		__undosh_ps0u=${PS0#"$__undosh_ps0p"}
	else
		__undosh_ps0u=${PS0-}
	fi
	# The settings go back after __undosh_pre has read the line:
	# HISTSIZE=0 empties the history.
	__undosh_ps0p='${__undosh_A[x${__undosh_ran:=1}]}${__undosh_A[x${PROMPT_COMMAND[99]:=__undosh_post}]}${__undosh_A[x${__undosh_line:=$(__undosh_pre "$?")}]}'$restore
	PS0=$__undosh_ps0p$__undosh_ps0u
}

if [[ ${1-} == pre ]]; then
	# PS0's command substitution, before the hooks are installed: the
	# settings are as the user left them.
	__undosh_hcu=${HISTCONTROL-} __undosh_hiu=${HISTIGNORE-} __undosh_hsu=${HISTSIZE-} __undosh_hon=0 __undosh_forced=0
	[[ -o history ]] && __undosh_hon=1
	__undosh_pre "$2"
	return 0
fi

# Installing, from PROMPT_COMMAND: take the boot out of the shell.
unset -f __undosh_boot
export -n PS0 PROMPT_COMMAND
if [[ -n ${__undosh_env_ps0+set} ]]; then
	PS0=$__undosh_env_ps0
	export PS0
elif [[ ${PS0-} == "$__undosh_boot_ps0"* ]]; then
	PS0=${PS0#"$__undosh_boot_ps0"}
	[[ -z $PS0 ]] && unset PS0
fi
for __undosh_i in "${!PROMPT_COMMAND[@]}"; do
	case ${PROMPT_COMMAND[__undosh_i]} in
	__undosh_boot) unset 'PROMPT_COMMAND[__undosh_i]' ;;
	__undosh_boot\;*) PROMPT_COMMAND[__undosh_i]=${PROMPT_COMMAND[__undosh_i]#__undosh_boot;} ;;
	*__undosh_boot*) PROMPT_COMMAND[__undosh_i]=${PROMPT_COMMAND[__undosh_i]//__undosh_boot/:} ;;
	esac
done
if [[ -n ${__undosh_env_pc+set} ]]; then
	export PROMPT_COMMAND
fi
unset __undosh_i __undosh_env_ps0 __undosh_env_pc __undosh_boot_ps0 __undosh_boot

declare -gA __undosh_A=()
declare -g __undosh_forced=1 __undosh_seq=0 __undosh_ps0u= __undosh_ps0p= __undosh_ran= __undosh_hon=1
declare -g __undosh_hcu=${HISTCONTROL-} __undosh_hcs=${HISTCONTROL-} __undosh_hcb=
declare -g __undosh_hiu=${HISTIGNORE-} __undosh_his=${HISTIGNORE-} __undosh_hib=
declare -g __undosh_hsu=${HISTSIZE-} __undosh_hss=${HISTSIZE-} __undosh_hsb=
declare -g __undosh_n
__undosh_n=$(HISTTIMEFORMAT= builtin history 1)
__undosh_n=${__undosh_n#"${__undosh_n%%[0-9]*}"}
__undosh_send hello "${__undosh_n%%[!0-9]*}"
unset __undosh_n
PROMPT_COMMAND[99]=__undosh_post
# A line PS0 protected before the hooks were here ends now.
__undosh_post "$__undosh_s"
