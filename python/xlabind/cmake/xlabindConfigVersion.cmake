# find_package(xlabind <version>): this installation's version is the Python
# package's (xlabind.__version__ in ../__init__.py); compatible within a
# major version, and within 0.x a minor one.
file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/../__init__.py" _xlabind_version_line
     REGEX "^__version__ = \"[^\"]+\"")
string(REGEX REPLACE "^__version__ = \"([^\"]+)\"" "\\1" PACKAGE_VERSION
       "${_xlabind_version_line}")
set(PACKAGE_VERSION_COMPATIBLE FALSE)
set(PACKAGE_VERSION_EXACT FALSE)
if(PACKAGE_FIND_VERSION)
  string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _have "${PACKAGE_VERSION}")
  set(_have_major "${CMAKE_MATCH_1}")
  set(_have_minor "${CMAKE_MATCH_2}")
  if(NOT PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION
     AND _have_major EQUAL PACKAGE_FIND_VERSION_MAJOR
     AND (NOT _have_major EQUAL 0 OR _have_minor EQUAL PACKAGE_FIND_VERSION_MINOR))
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
  endif()
  if(PACKAGE_VERSION VERSION_EQUAL PACKAGE_FIND_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()
