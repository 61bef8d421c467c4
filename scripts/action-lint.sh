#!/usr/bin/env bash
# The GitHub Action's lint step (action.yml): runs the memlint that scripts/action-install.sh
# installed with the action's inputs, the image after `--` (an image input that starts with `-`
# is an image, never a flag), and writes the `sarif` step output as a heredoc with a random
# delimiter, so an input holding newlines cannot add outputs of its own.
#
# Environment: MEMLINT (the binary), INPUT_IMAGE (required); INPUT_DOCKERFILE, INPUT_FORMAT,
# INPUT_OUTPUT, INPUT_FAIL_ON, INPUT_CONFIG, INPUT_PLATFORM, INPUT_CATEGORY, GITHUB_OUTPUT.
set -uo pipefail
: "${MEMLINT:?MEMLINT is not set}" "${INPUT_IMAGE:?the image input is empty}"

args=(lint --format "${INPUT_FORMAT:-github}" --fail-on "${INPUT_FAIL_ON:-warning}")
[ -n "${INPUT_DOCKERFILE:-}" ] && args+=(--dockerfile "$INPUT_DOCKERFILE")
[ -n "${INPUT_CONFIG:-}" ] && args+=(--config "$INPUT_CONFIG")
[ -n "${INPUT_PLATFORM:-}" ] && args+=(--platform "$INPUT_PLATFORM")
[ -n "${INPUT_CATEGORY:-}" ] && args+=(--category "$INPUT_CATEGORY")
if [ -n "${INPUT_OUTPUT:-}" ]; then
  args+=(-o "sarif=$INPUT_OUTPUT")
  if [ -n "${GITHUB_OUTPUT:-}" ]; then
    delimiter="memlint_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
    case "$INPUT_OUTPUT" in
      *"$delimiter"*)
        echo "::error title=memlint::the output input holds the output delimiter" >&2
        exit 2
        ;;
    esac
    {
      printf 'sarif<<%s\n' "$delimiter"
      printf '%s\n' "$INPUT_OUTPUT"
      printf '%s\n' "$delimiter"
    } >>"$GITHUB_OUTPUT"
  fi
fi
exec "$MEMLINT" "${args[@]}" -- "$INPUT_IMAGE"
