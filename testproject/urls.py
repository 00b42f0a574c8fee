from django.contrib import admin
from django.urls import include, path

from testproject.demo.views import wait_page

urlpatterns = [
    path("admin/", admin.site.urls),
    path("zqueue/", include("django_zqueue.urls")),
    path("demo/wait/", wait_page, name="demo-wait"),
]
