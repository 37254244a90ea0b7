# Run by cpack (CPACK_PRE_BUILD_SCRIPTS) on the tree `cmake --install` put in
# its staging directory, before it packs: what Debian wants of a package
# and `cmake --install` into /usr/local has no use for. Man pages are
# gzipped, as man-db reads them (Policy 12.1), and the package carries its
# copyright and changelog in /usr/share/doc/kpipe (Policy 12.5, 12.7).
# gzip -n leaves out the name and time, so that two packs of one tree make
# the same files.
set(root "${CPACK_TEMPORARY_INSTALL_DIRECTORY}")
if(NOT IS_DIRECTORY "${root}/usr/share/man")
  message(FATAL_ERROR "kpipe prebuild: no usr/share/man in ${root}")
endif()
file(GLOB pages "${root}/usr/share/man/man*/*.[0-9]")
foreach(page ${pages})
  execute_process(COMMAND gzip -9nf "${page}" COMMAND_ERROR_IS_FATAL ANY)
endforeach()
set(doc "${root}/usr/share/doc/kpipe")
# file(COPY_FILE), not file(INSTALL): cpack's DESTDIR, still set here, would
# be put in front of the destination.
foreach(name copyright changelog)
  file(COPY_FILE "${CMAKE_CURRENT_LIST_DIR}/${name}" "${doc}/${name}")
  file(CHMOD "${doc}/${name}" PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
endforeach()
# A version without a Debian revision makes a native package, whose
# changelog is changelog.gz.
execute_process(COMMAND gzip -9nf "${doc}/changelog" COMMAND_ERROR_IS_FATAL ANY)
