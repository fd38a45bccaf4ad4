# Sourced by the bench scripts: the peers' jars.
#
# build_jar DIR JAR builds the Maven project in DIR into JAR when JAR is
# missing or older than DIR's pom.xml or sources. If the build fails it
# removes JAR (so no stale jar runs), says so, and returns 1.

build_jar() {
  if [ ! -f "$2" ] || [ -n "$(find "$1/pom.xml" "$1/src" -newer "$2" -type f)" ]; then
    if ! (cd "$1" && mvn -q -B package -DskipTests); then
      echo "bench: $1 did not build" >&2
      rm -f "$2"
      return 1
    fi
  fi
}
