# The Debian package, kpipe_<version>_<arch>.deb (scripts/package, or cpack
# -G DEB in the build directory): what `cmake --install` puts under the
# prefix, with the prefix /usr (see tools/CMakeLists.txt for what goes
# where). Its version is the project's, the one --version prints; its
# Depends are computed by dpkg-shlibdeps from the libraries the programs
# link (librdkafka, SQLite, libpq, fmt, simdjson, xxhash, libstdc++).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME kpipe)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "kpipe maintainers <maintainers@users.noreply.a-seed-5aa73062.example>"
  CACHE STRING "The Debian package's Maintainer")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "small Unix programs for Kafka streams")
set(CPACK_PACKAGE_DESCRIPTION [[
kpipe's programs read and write NDJSON, one record per line, and compose
with each other and with jq, awk, sort, cron and systemd: kconsume and
kproduce (Kafka in and out), kwindow (event-time windows), kdedup, kjoin,
kupsert (an idempotent sink into SQLite or PostgreSQL), kcheckpoint
(exactly-once checkpoints), klag (consumer lag and alerts), kdlq (dead
letters) and kbroker (an in-memory broker for demos and tests).
The unit kpipe-pipeline@.service runs a pipeline under systemd.]])
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "bash-completion, zsh")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
# Directories as Debian wants them, whatever the umask of the one who packs.
set(CPACK_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS
  OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
# Man pages gzipped, the copyright and the changelog: debian/prebuild.cmake
# does to the staged tree what lintian asks of a Debian package (the package
# test runs lintian). The changelog's first entry is this version's: a new
# version needs an entry (the package test checks that it has one).
set(KPIPE_DEBIAN_DIR ${CMAKE_CURRENT_LIST_DIR}/debian)
set(CPACK_PRE_BUILD_SCRIPTS ${KPIPE_DEBIAN_DIR}/prebuild.cmake)
# systemd rereads its units after the package adds, changes or removes one.
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${KPIPE_DEBIAN_DIR}/postinst ${KPIPE_DEBIAN_DIR}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
