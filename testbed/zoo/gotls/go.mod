module netsurvey.test/zoo/gotls

go 1.24
